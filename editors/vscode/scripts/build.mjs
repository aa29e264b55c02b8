// Bundles the extension host (dist/extension.js, CommonJS, vscode external)
// and the webview (dist/webview.js, IIFE for the browser), and copies the
// webview's CSS and the codicon font into dist/ so the .vsix ships them.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
const production = process.env.NODE_ENV !== 'development';

await Promise.all([
  build({
    entryPoints: [join(root, 'src/extension.ts')],
    outfile: join(dist, 'extension.js'),
    bundle: true, platform: 'node', format: 'cjs', target: 'node20',
    external: ['vscode'], minify: production, sourcemap: !production, logLevel: 'warning',
  }),
  build({
    entryPoints: [join(root, 'webview/main.ts')],
    outfile: join(dist, 'webview.js'),
    bundle: true, platform: 'browser', format: 'iife', target: 'es2022',
    minify: production, sourcemap: !production, logLevel: 'warning',
  }),
]);
copyFileSync(join(root, 'webview/style.css'), join(dist, 'webview.css'));
for (const f of ['codicon.css', 'codicon.ttf']) copyFileSync(join(root, 'node_modules/@vscode/codicons/dist', f), join(dist, f));
console.log('built dist/');
