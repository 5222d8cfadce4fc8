# Seeds a gateway's state.db with N request-log rows spread over the last 7 days (a mix of
# sources, models, keys, errors and latencies), for bench/webui/overview.sh.
import random, sqlite3, sys, time, uuid

db, n = sys.argv[1], int(sys.argv[2])
now = int(time.time() * 1000)
week = 7 * 86_400_000
rng = random.Random(7)
conn = sqlite3.connect(db)
rows = []
for i in range(n):
    at = now - rng.randrange(week)
    failed = rng.random() < 0.03
    total = int(rng.lognormvariate(6, 0.8))
    rows.append((at, uuid.UUID(int=rng.getrandbits(128)).hex, rng.choice(["team-a", "team-b", "ci"]), None, "model",
                 rng.choice(["alpha", "beta"]), rng.choice(["gpt-4o-mini", "gpt-4o"]), 502 if failed else 200,
                 "upstream_error" if failed else None, "source answered 500" if failed else None,
                 total // 3, total, rng.randrange(20, 4000), rng.randrange(1, 800), 0, rng.random() < 0.7, 0, None, 0))
conn.executemany(
    "INSERT INTO request_logs (at_ms, request_id, key, route, mode, source, model, status, error, message, "
    "first_byte_ms, total_ms, tokens_in, tokens_out, tokens_cached, stream, affinity_hit, fusion_id, usage_estimated) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
conn.commit()
print(f"seeded {n} rows")
