#!/usr/bin/env python3
"""Pastes the real output under every checked `console` block of README.md and docs/*.md.

tests/doc_commands.rs compares those blocks with what the commands print, line by line. After a
change to what a command prints, run this from the repository root with the built binary, e.g.
`python3 scripts/doc-outputs.py target/debug/infscale`, and read the diff: each block keeps as
many lines as it showed (a page may cut the rest), plus the key lines a table adds below itself
for the short names it gives long policies. Blocks marked `<!-- cmd: needs ... -->` are left alone."""
import glob, re, subprocess, sys, shlex
BIN = sys.argv[1]
KEY = re.compile(r'^(#\d+|recommended|always on|your policy):  ')
pages = ['README.md'] + sorted(glob.glob('docs/*.md'))
for p in pages:
    lines = open(p).read().split('\n')
    out = []
    i = 0
    changed = False
    while i < len(lines):
        out.append(lines[i])
        if not lines[i].startswith('```console'):
            i += 1
            continue
        above = next((l.strip() for l in reversed(lines[:i]) if l.strip()), '')
        j = i + 1
        while not lines[j].startswith('```'):
            j += 1
        body = lines[i + 1:j]
        if above.startswith('<!-- cmd:'):
            out.extend(body); out.append(lines[j]); i = j + 1; continue
        k = 0
        while k < len(body):
            if not body[k].startswith('$ '):
                out.append(body[k]); k += 1; continue
            cmd = [body[k]]
            while cmd[-1].rstrip().endswith('\\'):
                k += 1; cmd.append(body[k])
            out.extend(cmd)
            k += 1
            shown = []
            while k < len(body) and not body[k].startswith('$ '):
                shown.append(body[k]); k += 1
            text = ' '.join(c.rstrip().rstrip('\\') for c in cmd)[2:]
            text = re.sub(r'\s#.*$', '', text)
            parts = [s.strip() for s in text.split('|')]
            words = shlex.split(parts[0])
            args = words[words.index('--') + 1:]
            res = subprocess.run([BIN] + args, capture_output=True, text=True)
            new = [l.rstrip() for l in res.stdout.split('\n')]
            if new and new[-1] == '':
                new.pop()
            for f in parts[1:]:
                w = f.split(); n = int(w[1].lstrip('-'))
                new = new[:n] if w[0] == 'head' else new[-n:]
            keys = sum(1 for l in new if KEY.match(l))
            old_keys = sum(1 for l in shown if KEY.match(l))
            count = len(shown) + keys - old_keys
            new = new[:count]
            if new != shown:
                changed = True
                print(f'{p}:{i+1}: {text[:80]}: {len(shown)} -> {len(new)} lines')
            out.extend(new)
        out.append(lines[j])
        i = j + 1
    if changed:
        open(p, 'w').write('\n'.join(out))
