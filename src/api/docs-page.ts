/**
 * The offline API reference page served at /api/v1/docs: one self-contained HTML document (no CDN, no
 * external fonts) that reads /api/v1/openapi.json and renders every operation with its parameters,
 * request body and response schemas.
 */
export function docsPage(title: string, version: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)} ${escapeHtml(version)}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330;background:#f7f8fa}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}header p{margin:4px 0 0;opacity:.8}
main{max-width:1100px;margin:0 auto;padding:16px 24px}h2{margin:28px 0 8px;text-transform:capitalize;border-bottom:1px solid #d5d9e0;padding-bottom:4px}
details{background:#fff;border:1px solid #d5d9e0;border-radius:6px;margin:6px 0}summary{cursor:pointer;padding:8px 12px;display:flex;gap:10px;align-items:baseline}
.m{font:600 12px ui-monospace,monospace;padding:2px 6px;border-radius:4px;color:#fff;min-width:52px;text-align:center}
.GET{background:#2f7d32}.POST{background:#1f5fa8}.PUT{background:#a86a1f}.DELETE{background:#a82f2f}.PATCH{background:#6b3fa8}
.p{font-family:ui-monospace,monospace}.s{color:#555}.body{padding:4px 14px 12px}pre{background:#f0f2f5;padding:8px;border-radius:4px;overflow:auto;font-size:12px}
table{border-collapse:collapse}td,th{border:1px solid #e0e3e8;padding:3px 8px;text-align:left;font-size:13px}input{font:inherit;padding:4px 8px;width:320px}
</style></head><body>
<header><h1>${escapeHtml(title)}</h1><p>version ${escapeHtml(version)} · OpenAPI document: <a style="color:#9cf" href="openapi.json">openapi.json</a> · every route except health needs <code>Authorization: Bearer &lt;token&gt;</code> from api-handshake.json</p></header>
<main><p><input id="q" placeholder="filter routes (e.g. traffic, mock, PUT)"></p><div id="out">Loading openapi.json…</div></main>
<script>
const esc=s=>String(s).replace(/[&<>"]/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
let spec;
function resolve(s){if(s&&s.$ref){const n=s.$ref.split('/').pop();return (spec.components&&spec.components.schemas&&spec.components.schemas[n])||s}return s}
function schemaText(s){return esc(JSON.stringify(s,(k,v)=>v&&v.$ref?resolve(v):v,2))}
function render(){
  const q=document.getElementById('q').value.toLowerCase();const groups={};
  for(const [path,ops] of Object.entries(spec.paths||{}))for(const [method,op] of Object.entries(ops)){
    const M=method.toUpperCase();const tag=(op.tags&&op.tags[0])||'other';
    if(q&&!(path+' '+M+' '+tag+' '+(op.summary||'')).toLowerCase().includes(q))continue;
    (groups[tag]=groups[tag]||[]).push({path,M,op});}
  let h='';
  for(const tag of Object.keys(groups).sort()){h+='<h2>'+esc(tag)+'</h2>';
    for(const {path,M,op} of groups[tag]){
      h+='<details><summary><span class="m '+M+'">'+M+'</span><span class="p">'+esc(path)+'</span><span class="s">'+esc(op.summary||'')+'</span></summary><div class="body">';
      if(op.description)h+='<p>'+esc(op.description)+'</p>';
      if(op.parameters&&op.parameters.length){h+='<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>required</th><th>schema</th></tr>';
        for(const p of op.parameters)h+='<tr><td class="p">'+esc(p.name)+'</td><td>'+esc(p.in)+'</td><td>'+(p.required?'yes':'no')+'</td><td class="p">'+esc(JSON.stringify(p.schema||{}))+'</td></tr>';h+='</table>';}
      const rb=op.requestBody&&op.requestBody.content;if(rb){for(const [ct,c] of Object.entries(rb)){h+='<h4>Request body ('+esc(ct)+')</h4><pre>'+schemaText(resolve(c.schema))+'</pre>';break;}}
      if(op.responses){h+='<h4>Responses</h4>';for(const [code,r] of Object.entries(op.responses)){h+='<div><b>'+esc(code)+'</b> '+esc(r.description||'');const c=r.content&&Object.values(r.content)[0];if(c&&c.schema)h+='<pre>'+schemaText(resolve(c.schema))+'</pre>';h+='</div>';}}
      h+='</div></details>';}}
  document.getElementById('out').innerHTML=h||'<p>No route matches.</p>';}
fetch('openapi.json').then(r=>r.json()).then(s=>{spec=s;render();document.getElementById('q').oninput=render;}).catch(e=>{document.getElementById('out').textContent='Could not load openapi.json: '+e});
</script></body></html>`;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);
}
