/**
 * The shape of a Postman collection v2.1 document, written here by hand as a JSON Schema (draft-07) from the
 * published format: what an importer (Postman, newman) relies on. It checks the structure the export must get
 * right — info, nested items and item groups, requests (string or object form), URLs, headers, bodies and their
 * modes, auth by type, events with scripts, variables — and, like the published schema, lets extra fields through.
 */
const keyValue = {
  type: "object",
  required: ["key"],
  properties: {
    key: { type: ["string", "null"] },
    value: { type: ["string", "null"] },
    disabled: { type: "boolean" },
    description: { $ref: "#/definitions/description" },
  },
};

const authAttribute = {
  type: "object",
  required: ["key"],
  properties: { key: { type: "string" }, value: {}, type: { type: "string" } },
};

export const POSTMAN_V21_SHAPE = {
  $schema: "http://json-schema.org/draft-07/schema#",
  type: "object",
  required: ["info", "item"],
  properties: {
    info: {
      type: "object",
      required: ["name", "schema"],
      properties: {
        name: { type: "string" },
        _postman_id: { type: "string" },
        schema: { const: "https://schema.getpostman.com/json/collection/v2.1.0/collection.json" },
        description: { $ref: "#/definitions/description" },
      },
    },
    item: { type: "array", items: { $ref: "#/definitions/itemOrGroup" } },
    event: { $ref: "#/definitions/events" },
    variable: { $ref: "#/definitions/variables" },
    auth: { $ref: "#/definitions/authOrNull" },
  },
  definitions: {
    description: { anyOf: [{ type: "string" }, { type: "object", properties: { content: { type: "string" }, type: { type: "string" } } }, { type: "null" }] },
    itemOrGroup: { anyOf: [{ $ref: "#/definitions/item" }, { $ref: "#/definitions/group" }] },
    group: {
      type: "object",
      required: ["item"],
      properties: {
        name: { type: "string" },
        description: { $ref: "#/definitions/description" },
        item: { type: "array", items: { $ref: "#/definitions/itemOrGroup" } },
        event: { $ref: "#/definitions/events" },
        variable: { $ref: "#/definitions/variables" },
        auth: { $ref: "#/definitions/authOrNull" },
      },
    },
    item: {
      type: "object",
      required: ["request"],
      properties: {
        id: { type: "string" },
        name: { type: "string" },
        description: { $ref: "#/definitions/description" },
        request: { $ref: "#/definitions/request" },
        response: { type: "array" },
        event: { $ref: "#/definitions/events" },
        variable: { $ref: "#/definitions/variables" },
      },
      not: { required: ["item"] },
    },
    request: {
      anyOf: [
        { type: "string" },
        {
          type: "object",
          properties: {
            url: { $ref: "#/definitions/url" },
            method: { type: "string", pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$" },
            header: { anyOf: [{ type: "array", items: keyValue }, { type: "string" }] },
            body: { $ref: "#/definitions/bodyOrNull" },
            auth: { $ref: "#/definitions/authOrNull" },
            description: { $ref: "#/definitions/description" },
          },
        },
      ],
    },
    url: {
      anyOf: [
        { type: "string" },
        {
          type: "object",
          properties: {
            raw: { type: "string" },
            protocol: { type: "string" },
            host: { anyOf: [{ type: "string" }, { type: "array", items: { type: "string" } }] },
            path: { anyOf: [{ type: "string" }, { type: "array", items: { anyOf: [{ type: "string" }, { type: "object", properties: { type: { type: "string" }, value: { type: "string" } } }] } }] },
            port: { type: "string" },
            query: { type: "array", items: keyValue },
            hash: { type: "string" },
            variable: { type: "array", items: keyValue },
          },
        },
      ],
    },
    bodyOrNull: {
      anyOf: [
        { type: "null" },
        {
          type: "object",
          properties: {
            mode: { enum: ["raw", "urlencoded", "formdata", "file", "graphql"] },
            raw: { type: "string" },
            urlencoded: { type: "array", items: keyValue },
            formdata: {
              type: "array",
              items: {
                type: "object",
                required: ["key"],
                properties: { key: { type: "string" }, value: { type: "string" }, type: { enum: ["text", "file"] }, disabled: { type: "boolean" }, contentType: { type: "string" } },
              },
            },
            graphql: { type: "object" },
            options: { type: "object" },
            disabled: { type: "boolean" },
          },
        },
      ],
    },
    authOrNull: {
      anyOf: [
        { type: "null" },
        {
          type: "object",
          required: ["type"],
          properties: {
            type: { enum: ["apikey", "awsv4", "basic", "bearer", "digest", "edgegrid", "hawk", "noauth", "oauth1", "oauth2", "ntlm", "jwt", "asap", "akamai"] },
            noauth: {},
            apikey: { type: "array", items: authAttribute },
            basic: { type: "array", items: authAttribute },
            bearer: { type: "array", items: authAttribute },
          },
        },
      ],
    },
    events: {
      type: "array",
      items: {
        type: "object",
        required: ["listen"],
        properties: {
          listen: { type: "string" },
          disabled: { type: "boolean" },
          script: {
            type: "object",
            properties: {
              id: { type: "string" },
              type: { type: "string" },
              exec: { anyOf: [{ type: "string" }, { type: "array", items: { type: "string" } }] },
              name: { type: "string" },
            },
          },
        },
      },
    },
    variables: {
      type: "array",
      items: {
        type: "object",
        anyOf: [{ required: ["key"] }, { required: ["id"] }],
        properties: {
          id: { type: "string" },
          key: { type: "string" },
          value: {},
          type: { enum: ["string", "boolean", "any", "number"] },
          name: { type: "string" },
          disabled: { type: "boolean" },
          description: { $ref: "#/definitions/description" },
        },
      },
    },
  },
} as const;
