"""Dict- and list-heavy Python workload for the benchmark harness (bench/run).

    python3 dicts.py [N]

Builds and tears down dicts of lists, lists of tuples and string keys, N records per round,
for a few rounds: the allocation pattern of a Python service that parses, groups and
aggregates records. Deterministic; prints a checksum.
"""
import sys


def make_records(n, seed):
    x = seed
    records = []
    for i in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        records.append({
            "id": i,
            "user": "user-%d" % (x % 5000),
            "tags": ["t%d" % ((x >> k) % 97) for k in range(x % 6)],
            "score": (x % 1000) / 10.0,
        })
    return records


def group(records):
    by_user = {}
    for r in records:
        by_user.setdefault(r["user"], []).append(r)
    tag_count = {}
    for r in records:
        for t in r["tags"]:
            tag_count[t] = tag_count.get(t, 0) + 1
    top = sorted(by_user.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:100]
    return by_user, tag_count, top


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    checksum = 0
    for round_ in range(4):
        records = make_records(n, round_ + 1)
        by_user, tag_count, top = group(records)
        pairs = [(r["user"], r["score"]) for r in records if r["score"] > 50.0]
        index = {u: sum(r["score"] for r in rs) for u, rs in by_user.items()}
        checksum += len(pairs) + len(index) + sum(tag_count.values()) + len(top[0][1])
        del records, by_user, tag_count, top, pairs, index
    print("checksum", checksum)


if __name__ == "__main__":
    main()
