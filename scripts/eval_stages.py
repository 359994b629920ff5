"""Reads the stages of a pipeline run out of its `quorum eval` records: for each question, the
SQL the pipeline held after each stage (PreSQL, first FinSQL, after revision, after the vote,
final), written as `stage-<name>.jsonl` predictions for `quorum eval --predictions`.

    python3 scripts/eval_stages.py RUN.jsonl OUT_DIR
    quorum eval --slice dev100 --ids "$(cat RUN.ids)" --predictions OUT_DIR/stage-voted.jsonl --out scored.jsonl
"""
import collections
import json
import os
import sys

src, outdir = sys.argv[1], sys.argv[2]
os.makedirs(outdir, exist_ok=True)
stages = collections.OrderedDict((k, []) for k in
    ['presql', 'finsql_repaired', 'revised', 'voted', 'final'])
for line in open(src):
    r = json.loads(line)
    cands = r['candidates']
    idx = r['index']
    if not cands:
        for k in stages: stages[k].append({'index': idx, 'sql': ''})
        continue
    def ok(c): return c['outcome'] and 'ok' in c['outcome']
    pre = next(c for c in cands if c['round'].endswith('PRE_SQL'))
    fins = [c for c in cands if c['round'].endswith('FIN_SQL')]
    fin = fins[0] if fins else pre
    stages['presql'].append({'index': idx, 'sql': pre['sql']})
    stages['finsql_repaired'].append({'index': idx, 'sql': fin['sql']})
    # Revision of the first generator's chain: fixes of a candidate with the FinSQL's SQL and model.
    head = fin
    if not ok(fin):
        same = {c['id'] for c in cands if c['sql'] == fin['sql'] and c['model'] == fin['model']}
        fixes = [c for c in cands if c['round'].endswith('REVISION') and c['revised_from'] in same]
        good = [c for c in fixes if ok(c)]
        if good:
            counts = collections.Counter(c['outcome']['ok']['signature'] for c in good)
            best = max(counts.values())
            head = next(c for c in good if counts[c['outcome']['ok']['signature']] == best)
    stages['revised'].append({'index': idx, 'sql': head['sql']})
    winner = r['votes'].get('winner')
    voted = next((c for c in cands if c['id'] == winner), None) if winner is not None else None
    stages['voted'].append({'index': idx, 'sql': (voted or pre)['sql'] if winner is not None else r['prediction']})
    stages['final'].append({'index': idx, 'sql': r['prediction']})
for k, v in stages.items():
    with open(f'{outdir}/stage-{k}.jsonl', 'w') as f:
        for p in v: f.write(json.dumps(p) + '\n')
print('indices:', ','.join(str(p['index']) for p in stages['final']))
