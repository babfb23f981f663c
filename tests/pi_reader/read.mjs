// What pi 0.85.1's SessionManager makes of a session file: its default leaf, the context it
// builds there (role, customType and text of each message), its labels and the session name.
// Usage: node read.mjs <folder holding node_modules> <session.jsonl>   (prints one JSON line)
// The file is read, never written: its header must carry pi's version 3 (pi migrates and
// rewrites older headers), so callers hand it a copy.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [root, file] = process.argv.slice(2);
const pi = await import(pathToFileURL(path.resolve(root, 'node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js')).href);
const sm = pi.SessionManager.open(file);
const text = (content) => typeof content === 'string'
  ? content
  : (content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join('');
const out = {
  leafId: sm.getLeafId() ?? null,
  name: sm.getSessionName() ?? null,
  labels: Object.fromEntries(sm.labelsById),
  messages: sm.buildSessionContext().messages.map((m) => ({
    role: m.role,
    customType: m.customType ?? null,
    text: text(m.content),
  })),
};
process.stdout.write(JSON.stringify(out) + '\n');
