// Builds the JavaScript guests with the componentize-js library API:
//   node build.mjs <wit-dir> <out-dir>
// (`jco componentize` is not used: the library's `componentize()` is.)
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';

const [witPath, outDir, ...only] = process.argv.slice(2);
if (!witPath || !outDir) {
  console.error('usage: node build.mjs <wit-dir> <out-dir> [packing|health ...]');
  process.exit(2);
}
const here = fileURLToPath(new URL('.', import.meta.url));
const wit = resolve(witPath);
const out = resolve(outDir);
// componentize-js resolves the source inside the current directory (it
// maps that directory into the pre-initializer): build from here, with a
// relative `sourcePath`.
process.chdir(here);
const guests = [
  { name: 'js-packing', source: 'packing.js', world: 'preferred-allocation-indexed-guest' },
  { name: 'js-health', source: 'health.js', world: 'health-guest' },
].filter((g) => only.length === 0 || only.includes(g.name.replace('js-', '')));

for (const guest of guests) {
  const started = Date.now();
  const { component } = await componentize({
    sourcePath: guest.source,
    witPath: wit,
    worldName: `wasm-device-plugin:policy/${guest.world}@0.1.1`,
    // No `fetch` and no incoming-handler: the host provides no wasi:http.
    // stdio, random and clocks stay (the host serves them, inert).
    disableFeatures: ['http', 'fetch-event'],
  });
  const file = join(out, `${guest.name}.wasm`);
  await writeFile(file, component);
  console.log(`${file}: ${component.length} bytes in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
