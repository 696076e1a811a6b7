// Sandbox prelude, part 6 of 7: the response assertions Postman adds to chai (pm.response.to.have.status(200),
// pm.response.to.be.ok, .to.have.header(...), .to.have.jsonBody(...)...), with Postman's messages. On anything that
// is not a response (or request, for header) they fail with a clear message; `ok` keeps chai's meaning there.

chai.use(function (chai, utils) {
  const Assertion = chai.Assertion;

  function response(assertion) {
    const obj = assertion._obj;
    if (!(obj instanceof ResponseView)) {
      throw new chai.AssertionError(`expected a response (pm.response or a pm.sendRequest response) but got ${utils.inspect(obj)}`);
    }
    return obj;
  }

  function statusClass(cls, label) {
    return function () {
      const r = response(this);
      this.assert(Math.floor(r.code / 100) === cls, `expected response code to be ${label} but found #{act}`, `expected response code to not be ${label}`, cls, r.code);
    };
  }

  function statusCodeIs(code) {
    return function () {
      const r = response(this);
      this.assert(r.code === code, "expected response to have status code #{exp} but got #{act}", "expected response to not have status code #{act}", code, r.code);
    };
  }

  // 1XX ... 5XX, and 4XX or 5XX
  Assertion.addProperty("info", statusClass(1, "1XX"));
  Assertion.addProperty("success", statusClass(2, "2XX"));
  Assertion.addProperty("redirection", statusClass(3, "3XX"));
  Assertion.addProperty("clientError", statusClass(4, "4XX"));
  Assertion.addProperty("serverError", statusClass(5, "5XX"));
  Assertion.addProperty("error", function () {
    const r = response(this);
    const cls = Math.floor(r.code / 100);
    this.assert(cls === 4 || cls === 5, "expected response code to be 4XX or 5XX but found #{act}", "expected response code to not be 4XX or 5XX", null, r.code);
  });

  // Named codes (checked by code; servers vary in the reason phrase they send)
  const named = {
    accepted: 202, withoutContent: 204, badRequest: 400, unauthorized: 401, unauthorised: 401, forbidden: 403,
    notFound: 404, notAcceptable: 406, rateLimited: 429,
  };
  for (const name of objectKeys(named)) Assertion.addProperty(name, statusCodeIs(named[name]));

  // On a response, ok means status 200 (as in Postman); on anything else it keeps chai's truthiness check.
  Assertion.overwriteProperty("ok", function (_super) {
    return function () {
      if (this._obj instanceof ResponseView) statusCodeIs(200).call(this);
      else _super.call(this);
    };
  });

  Assertion.addMethod("statusCodeClass", function (cls) {
    statusClass(Number(cls), `${cls}XX`).call(this);
  });

  Assertion.addMethod("statusCode", function (code) {
    statusCodeIs(Number(code)).call(this);
  });

  Assertion.addMethod("statusReason", function (reason) {
    const r = response(this);
    const want = String(reason);
    this.assert(r.status === want, "expected response to have status reason #{exp} but got #{act}", "expected response to not have status reason #{act}", want, r.status);
  });

  // status(200) checks the code, status("Created") the reason phrase
  Assertion.addMethod("status", function (codeOrReason) {
    const r = response(this);
    if (typeof codeOrReason === "number") {
      this.assert(r.code === codeOrReason, "expected response to have status code #{exp} but got #{act}", "expected response to not have status code #{act}", codeOrReason, r.code);
    } else {
      const want = String(codeOrReason);
      this.assert(r.status === want, "expected response to have status reason #{exp} but got #{act}", "expected response to not have status reason #{act}", want, r.status);
    }
  });

  // header(name) checks presence, header(name, value) also the value (the last field with that name)
  Assertion.addMethod("header", function (name, value) {
    const obj = this._obj;
    const what = obj instanceof ResponseView ? "response" : obj instanceof RequestView ? "request" : null;
    if (!what) throw new chai.AssertionError(`expected a request or response but got ${utils.inspect(obj)}`);
    const has = obj.headers.has(name);
    this.assert(has, `expected ${what} to have header with key '${name}'`, `expected ${what} to not have header with key '${name}'`, true, has);
    if (arguments.length < 2) return;
    const actual = obj.headers.get(name);
    this.assert(actual === value, `expected '${name}' ${what} header to be #{exp} but got #{act}`, `expected '${name}' ${what} header to not be #{act}`, value, actual);
  });

  Assertion.addProperty("withBody", function () {
    const r = response(this);
    const text = r.text();
    this.assert(text.length > 0, "expected response to have content in body", "expected response to not have content in body");
  });

  function parseError(r) {
    try {
      r.json();
      return null;
    } catch (e) {
      return e.message;
    }
  }

  Assertion.addProperty("json", function () {
    const err = parseError(response(this));
    this.assert(err === null, `expected response body to be a valid json but got error ${err}`, "expected response body not to be a valid json");
  });

  // body() content present; body("text") equal; body(/re/) matches; body({...}) JSON deep-equal
  Assertion.addMethod("body", function (content) {
    const r = response(this);
    if (arguments.length === 0) {
      this.assert(r.text().length > 0, "expected response to have content in body", "expected response to not have content in body");
    } else if (content instanceof RegExp) {
      const text = r.text();
      this.assert(content.test(text), "expected response body text to match #{exp} but got #{act}", "expected response body text #{act} to not match #{exp}", content, text);
    } else if (isObject(content)) {
      let data;
      try {
        data = r.json();
      } catch (_) {
        data = undefined;
      }
      this.assert(utils.eql(data, content), "expected response body json to equal #{exp} but got #{act}", "expected response body json to not equal #{exp} but got #{act}", content, data);
    } else {
      const text = r.text();
      this.assert(text === content, "expected response body to equal #{exp} but got #{act}", "expected response body to not equal #{exp}", content, text);
    }
  });

  // jsonBody() valid JSON; jsonBody("data.items[0].id") path present; jsonBody(path, value) deep-equal at path
  Assertion.addMethod("jsonBody", function (path, value) {
    const r = response(this);
    const err = parseError(r);
    if (arguments.length === 0 || err !== null) {
      this.assert(err === null, `expected response body to be a valid json but got error ${err}`, "expected response body not to be a valid json");
      return;
    }
    const data = r.json();
    const at = lookupPath(data, path);
    this.assert(at.found, "expected #{act} in response to contain property #{exp}", "expected #{act} in response to not contain property #{exp}", path, data);
    if (arguments.length > 1) {
      this.assert(utils.eql(at.value, value), `expected response body json at "${path}" to contain #{exp} but got #{act}`, `expected response body json at "${path}" to not contain #{exp} but got #{act}`, value, at.value);
    }
  });
});

// pm.expect and the assertion prototype are shared by every run in this worker: frozen, so a script cannot change
// them for the next one.
objectFreeze(chai.expect);
objectFreeze(chai.Assertion.prototype);
