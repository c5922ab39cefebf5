// Builds the JavaScript guests with the componentize-js library API:
//   node build.mjs <wit-dir> <out-dir> [packing|health|sriov ...]
// (`jco componentize` is not used: the library's `componentize()` is.)
import { componentize } from '@bytecodealliance/componentize-js';
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';

const [witPath, outDir, ...only] = process.argv.slice(2);
if (!witPath || !outDir) {
  console.error('usage: node build.mjs <wit-dir> <out-dir> [packing|health|sriov ...]');
  process.exit(2);
}
const here = fileURLToPath(new URL('.', import.meta.url));
const wit = resolve(witPath);
const out = resolve(outDir);
// The policy package's version, e.g. 0.1.2: the worlds of wit/policy.wit
// are named with it.
const version = /^package wasm-device-plugin:policy@([^;]+);/m.exec(
  await readFile(join(wit, 'policy.wit'), 'utf8'),
)[1];
// componentize-js resolves the source inside the current directory (it
// maps that directory into the pre-initializer): build from here, with a
// relative `sourcePath`.
process.chdir(here);
const guests = [
  { name: 'js-packing', source: 'packing.js', world: `preferred-allocation-indexed-guest@${version}` },
  { name: 'js-health', source: 'health.js', world: `health-guest@${version}` },
  // A world of its own (dra-layout + dra-prepare + dra-unprepare), in
  // guests/polyglot/wit, whose deps/ links to the policy package.
  { name: 'js-sriov', source: 'sriov.js', world: 'sriov-guest', wit: '../wit', pkg: 'wdp-example:sriov' },
].filter((g) => only.length === 0 || only.includes(g.name.replace('js-', '')));

for (const guest of guests) {
  const started = Date.now();
  const { component } = await componentize({
    sourcePath: guest.source,
    witPath: guest.wit ? resolve(here, guest.wit) : wit,
    worldName: `${guest.pkg ?? 'wasm-device-plugin:policy'}/${guest.world}`,
    // No `fetch` and no incoming-handler: the host provides no wasi:http.
    // stdio, random and clocks stay (the host serves them, inert).
    disableFeatures: ['http', 'fetch-event'],
  });
  const file = join(out, `${guest.name}.wasm`);
  await writeFile(file, component);
  console.log(`${file}: ${component.length} bytes in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
