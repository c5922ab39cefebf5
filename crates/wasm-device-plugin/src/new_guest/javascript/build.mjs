// Builds config/guests/{{name}}.wasm from guest.js with the componentize-js
// library API (`jco componentize` is not used: the library's `componentize()`
// is; see docs/guests/javascript.md of wasm-device-plugin).
import { componentize } from '@bytecodealliance/componentize-js';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const here = fileURLToPath(new URL('.', import.meta.url));
// componentize-js resolves the source inside the current directory (it maps
// that directory into the pre-initializer): build from here, with a relative
// `sourcePath`.
process.chdir(here);
const started = Date.now();
const { component } = await componentize({
  sourcePath: 'guest.js',
  witPath: join(here, 'wit'),
  worldName: 'local:guest/guest',
  // No `fetch` and no incoming-handler: the host provides no wasi:http.
  disableFeatures: ['http', 'fetch-event'],
});
await mkdir(join('config', 'guests'), { recursive: true });
const out = join('config', 'guests', '{{name}}.wasm');
await writeFile(`${out}.tmp`, component);
await rename(`${out}.tmp`, out);
console.log(`built ${out} (${component.length} bytes) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
