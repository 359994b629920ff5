#!/usr/bin/env python3
"""Measures the sub-task RPCs (Text2Sql.LinkSchema, Debug, Optimize, Explain) on a Spider
slice through a running `quorum serve`, over gRPC, and writes one JSON line per call plus a
Markdown summary.

    scripts/subtask_eval.py --port 50051 --task link --out docs/runs/subtask-link.jsonl

Tasks:
  link      every question of the slice, PreSQL / few-shot / zero-shot, with and without
            foreign keys; few-shot ∪ PreSQL is the union of the two answers (the service's
            FEW_SHOT_PRE_SQL asks the same two greedy prompts). Scores: RES, R_e, R_s against
            the gold query's tables (read from --gold-tables, a `quorum eval` record).
  debug     the wrong answers of a baseline run (--baseline, a `quorum eval` record), each
            strategy with two rounds and the gold SQL as reference: fixed after one and two
            rounds, and the initial error taxonomy.
  optimize  the gold SQL of every question, per method: share of rewrites that keep the
            result, share kept (measured faster), median speed-up where timing is meaningful.
  explain   the gold SQL of every question explained and checked against its own question,
            and against another question (a fixed derangement) as the control.

Stubs: generated from proto/ with grpcio-tools into a temporary directory.
"""
import argparse
import concurrent.futures
import gzip
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def stubs():
    out = Path(tempfile.mkdtemp(prefix="quorum-stubs-"))
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{REPO / 'proto'}",
         f"--python_out={out}", f"--grpc_python_out={out}",
         *map(str, sorted((REPO / "proto/quorum/v1").glob("*.proto")))],
        check=True)
    sys.path.insert(0, str(out))
    from quorum.v1 import text2sql_pb2, text2sql_pb2_grpc  # noqa: E402
    return text2sql_pb2, text2sql_pb2_grpc


def load_slice(data, slice_name, questions="dev.json", sample=0):
    """The slice's questions of dev.json, or with `sample` that many questions of `questions`
    drawn with a fixed seed (the threshold calibration reads train.json this way)."""
    pool = json.loads((data / questions).read_text())
    if sample:
        ids = sorted(random.Random(7).sample(range(len(pool)), sample))
    else:
        ids = json.loads((data / "slices.json").read_text())[slice_name]
    return [(i, pool[i]) for i in ids]


def records(path):
    path = Path(path)
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return {r["index"]: r for r in map(json.loads, text.splitlines())}


def res(gold, linked):
    gold = {t.lower() for t in gold}
    linked = {t.lower() for t in linked}
    subset = gold <= linked
    score = 0.0 if not subset else (1.0 if not linked else (len(gold) / len(linked)) ** 0.5)
    return score, gold == linked, subset


def run_all(calls, concurrency, out):
    done = []
    with open(out, "a") as sink, concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(call) for call in calls]
        for n, f in enumerate(concurrent.futures.as_completed(futures), 1):
            rec = f.result()
            sink.write(json.dumps(rec) + "\n")
            sink.flush()
            done.append(rec)
            if n % 10 == 0:
                print(f"  {n}/{len(calls)}", file=sys.stderr, flush=True)
    return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=50051)
    ap.add_argument("--task", required=True, choices=["link", "debug", "optimize", "explain"])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared/data/spider")
    ap.add_argument("--slice", default="dev100")
    ap.add_argument("--questions", default="dev.json", help="with --sample: the pool to draw from")
    ap.add_argument("--sample", type=int, default=0, help="draw this many questions instead of the slice")
    ap.add_argument("--gold-tables", default=REPO / "docs/runs/dev100-zero-shot-simple-ddl.jsonl.gz")
    ap.add_argument("--baseline", default=REPO / "docs/runs/dev100-zero-shot-simple-ddl.jsonl.gz")
    ap.add_argument("--methods", default="", help="comma-separated subset")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--threshold", type=float, help="explain: the p_same cut to ask the server for")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    pb, rpc = stubs()
    import grpc
    stub = rpc.Text2SqlStub(grpc.insecure_channel(f"127.0.0.1:{args.port}"))
    questions = load_slice(args.data, args.slice, args.questions, args.sample)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("")
    started = time.time()
    wanted = [m for m in args.methods.split(",") if m]

    def timed(fn, request):
        t = time.time()
        try:
            return fn(request, timeout=args.timeout), None, (time.time() - t) * 1e3
        except grpc.RpcError as e:
            return None, f"{e.code().name}: {e.details()}", (time.time() - t) * 1e3

    lines = []
    if args.task == "link":
        gold = records(args.gold_tables)
        methods = wanted or ["pre_sql", "few_shot", "zero_shot"]
        enum = {"pre_sql": pb.LINK_METHOD_PRE_SQL, "few_shot": pb.LINK_METHOD_FEW_SHOT,
                "zero_shot": pb.LINK_METHOD_ZERO_SHOT}

        def call(i, ex, method, fk):
            def go():
                r, err, ms = timed(stub.LinkSchema, pb.LinkSchemaRequest(
                    question=ex["question"], db_id=ex["db_id"], method=enum[method],
                    foreign_keys=fk))
                return {"index": i, "method": method, "foreign_keys": fk, "error": err,
                        "ms": ms, "tables": [t.name for t in r.tables] if r else [],
                        "pre_sql": r.pre_sql if r and r.HasField("pre_sql") else None,
                        "listed": r.listed if r and r.HasField("listed") else None,
                        "gold_tables": gold[i]["gold_tables"]}
            return go
        recs = run_all([call(i, ex, m, fk) for m in methods for fk in (True, False)
                        for i, ex in questions], args.concurrency, args.out)
        by = {(r["index"], r["method"], r["foreign_keys"]): r for r in recs}
        rows = [(m, fk, [by[(i, m, fk)]["tables"] for i, _ in questions]) for m in methods
                for fk in (True, False)]
        if "pre_sql" in methods and "few_shot" in methods:
            for fk in (True, False):
                union = []
                for i, _ in questions:
                    a = by[(i, "few_shot", fk)]["tables"]
                    union.append(a + [t for t in by[(i, "pre_sql", fk)]["tables"]
                                      if t.lower() not in {x.lower() for x in a}])
                rows.append(("few_shot ∪ pre_sql", fk, union))
        lines.append("| method | foreign keys | RES | R_e | R_s | mean tables |")
        lines.append("|---|---|---|---|---|---|")
        for m, fk, linked in rows:
            scores = [res(gold[i]["gold_tables"], t) for (i, _), t in zip(questions, linked)]
            n = len(scores)
            lines.append(f"| {m} | {'yes' if fk else 'no'} | {sum(s[0] for s in scores)/n:.3f} | "
                         f"{sum(s[1] for s in scores)/n:.2f} | {sum(s[2] for s in scores)/n:.2f} | "
                         f"{statistics.mean(len(t) for t in linked):.2f} |")
        errors = sum(1 for r in recs if r["error"])
        lines.append(f"\n{len(recs)} calls, {errors} failed; median call "
                     f"{statistics.median(r['ms'] for r in recs)/1e3:.1f} s")
    elif args.task == "debug":
        base = records(args.baseline)
        wrong = [(i, ex) for i, ex in questions if not base[i]["ex"]]
        strategies = wanted or ["regenerate", "wrong_sql", "system_error", "all_errors", "with_comments"]
        enum = {"regenerate": pb.DEBUG_STRATEGY_REGENERATE, "wrong_sql": pb.DEBUG_STRATEGY_WRONG_SQL,
                "system_error": pb.DEBUG_STRATEGY_SYSTEM_ERROR,
                "all_errors": pb.DEBUG_STRATEGY_ALL_ERRORS,
                "with_comments": pb.DEBUG_STRATEGY_WITH_COMMENTS}

        def call(i, ex, s):
            def go():
                r, err, ms = timed(stub.Debug, pb.DebugRequest(
                    question=ex["question"], db_id=ex["db_id"], sql=base[i]["prediction"],
                    reference_sql=ex["query"], strategy=enum[s], rounds=2))
                return {"index": i, "strategy": s, "error": err, "ms": ms,
                        "initial": r.initial.kind if r else None,
                        "rounds": [{"sql": x.sql, "diagnosis": x.diagnosis.kind} for x in r.rounds] if r else [],
                        "fixed": bool(r and r.fixed)}
            return go
        recs = run_all([call(i, ex, s) for s in strategies for i, ex in wrong],
                       args.concurrency, args.out)
        n_all = len(questions)
        base_ex = sum(1 for i, _ in questions if base[i]["ex"])
        lines.append(f"Baseline: {args.baseline} — EX {base_ex}/{n_all}; {len(wrong)} wrong answers debugged.\n")
        lines.append("| strategy | fixed after 1 round | fixed after 2 rounds | EX after 1 | EX after 2 |")
        lines.append("|---|---|---|---|---|")
        for s in strategies:
            rs = [r for r in recs if r["strategy"] == s]
            one = sum(1 for r in rs if r["initial"] == "correct" or
                      (r["rounds"] and r["rounds"][0]["diagnosis"] == "correct"))
            two = sum(1 for r in rs if r["fixed"])
            lines.append(f"| {s} | {one}/{len(rs)} | {two}/{len(rs)} | "
                         f"{(base_ex+one)/n_all:.2f} | {(base_ex+two)/n_all:.2f} |")
        taxonomy = {}
        for r in recs:
            if r["strategy"] == strategies[0]:
                taxonomy[r["initial"]] = taxonomy.get(r["initial"], 0) + 1
        lines.append("\nInitial diagnosis of the wrong answers: " +
                     ", ".join(f"{k} {v}" for k, v in sorted(taxonomy.items(), key=lambda kv: -kv[1])))
        errors = sum(1 for r in recs if r["error"])
        lines.append(f"\n{len(recs)} calls, {errors} failed")
    elif args.task == "optimize":
        methods = wanted or ["with_sql", "few_shot_comments", "direct"]
        enum = {"with_sql": pb.OPTIMIZE_METHOD_WITH_SQL, "with_context": pb.OPTIMIZE_METHOD_WITH_CONTEXT,
                "few_shot": pb.OPTIMIZE_METHOD_FEW_SHOT,
                "few_shot_comments": pb.OPTIMIZE_METHOD_FEW_SHOT_COMMENTS,
                "direct": pb.OPTIMIZE_METHOD_DIRECT}

        def call(i, ex, m):
            def go():
                r, err, ms = timed(stub.Optimize, pb.OptimizeRequest(
                    sql=ex["query"], db_id=ex["db_id"], question=ex["question"], method=enum[m],
                    timing_pairs=20, min_speedup=1.1))
                rw = r.rewrites[0] if r and r.rewrites else None
                return {"index": i, "method": m, "error": err, "ms": ms,
                        "verdict": rw.verdict if rw else None, "sql": rw.sql if rw else None,
                        "speedup": rw.speedup if rw and rw.HasField("speedup") else None,
                        "original_ms": rw.original_ms if rw and rw.HasField("original_ms") else None}
            return go
        recs = run_all([call(i, ex, m) for m in methods for i, ex in questions],
                       args.concurrency, args.out)
        lines.append("| method | same result | kept (≥1.1× faster) | unchanged | different result | failed | median speed-up, same result | same, original ≥ 0.1 ms | median speed-up there |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for m in methods:
            rs = [r for r in recs if r["method"] == m]
            count = lambda v: sum(1 for r in rs if r["verdict"] == v)
            same = [r for r in rs if r["verdict"] in ("kept", "not_faster")]
            slow = [r for r in same if (r["original_ms"] or 0) >= 0.1]
            med = lambda xs: f"{statistics.median(xs):.2f}×" if xs else "–"
            lines.append(f"| {m} | {len(same)}/{len(rs)} | {count('kept')} | {count('unchanged')} | "
                         f"{count('different_result')} | {count('failed')} | "
                         f"{med([r['speedup'] for r in same if r['speedup']])} | {len(slow)} | "
                         f"{med([r['speedup'] for r in slow if r['speedup']])} |")
        errors = sum(1 for r in recs if r["error"])
        lines.append(f"\n{len(recs)} calls, {errors} failed")
    else:
        rng = random.Random(12)
        order = list(range(len(questions)))
        while True:
            rng.shuffle(order)
            if all(o != k for k, o in enumerate(order)):
                break

        def call(k, control):
            i, ex = questions[k]
            sql_from = questions[order[k]][1] if control else ex

            def go():
                r, err, ms = timed(stub.Explain, pb.ExplainRequest(
                    sql=sql_from["query"], db_id=sql_from["db_id"], question=ex["question"],
                    threshold=args.threshold))
                return {"index": i, "control": control, "error": err, "ms": ms,
                        "sql": sql_from["query"], "explanation": r.explanation if r else None,
                        "p_same": r.consistency.p_same if r else None,
                        "consistent": bool(r and r.consistency.consistent)}
            return go
        recs = run_all([call(k, c) for c in (False, True) for k in range(len(questions))],
                       args.concurrency, args.out)
        gold = [r for r in recs if not r["control"] and not r["error"]]
        ctrl = [r for r in recs if r["control"] and not r["error"]]
        tp = sum(r["consistent"] for r in gold) / len(gold)
        tn = sum(not r["consistent"] for r in ctrl) / len(ctrl)
        lines.append("| pairs | n | judged consistent | mean p_same |")
        lines.append("|---|---|---|---|")
        lines.append(f"| question + its gold SQL | {len(gold)} | {tp:.2f} | {statistics.mean(r['p_same'] for r in gold):.3f} |")
        lines.append(f"| question + another question's gold SQL | {len(ctrl)} | {1-tn:.2f} | {statistics.mean(r['p_same'] for r in ctrl):.3f} |")
        lines.append(f"\nAgreement (balanced accuracy) at the server's threshold: {(tp+tn)/2:.3f}")
        g = [r["p_same"] for r in gold]
        c = [r["p_same"] for r in ctrl]
        auc = sum((a > b) + 0.5 * (a == b) for a in g for b in c) / (len(g) * len(c))
        lines.append(f"Ranking agreement (AUC of p_same, own SQL above another's): {auc:.3f}")
        cuts = sorted(set(g + c))
        best = max(cuts, key=lambda t: (sum(x >= t for x in g) / len(g) + sum(x < t for x in c) / len(c)))
        acc = (sum(x >= best for x in g) / len(g) + sum(x < best for x in c) / len(c)) / 2
        lines.append(f"Best threshold on these pairs: {best:.4f} (balanced accuracy {acc:.3f})")
    lines.append(f"\nWall time {time.time()-started:.0f} s, concurrency {args.concurrency}.")
    md = "\n".join(lines)
    args.out.with_suffix(".md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
