#!/usr/bin/env python3
"""The groups page's and the jobs page's queries at a million crashes, in seconds, not hours.

Issue 40's store at a million crashes (`bench/store.sh`, through the insert path) takes an
hour on SQLite and two on PostgreSQL here. This fills only what the groups page and the
jobs page read -- the rollups of migrations 0006/0021/0026/0035 (`crash_groups`,
`crash_group_running`, `crash_group_kinds`, `crash_group_days`) and a queue of a million
rows -- with `postmortem bench store`'s distribution (the same xorshift64* generator,
signature floor(5000 u^3), products App0-2 by signature, ten versions, one kind,
`null-pointer`, evenly over 90 days), on SQLite (the `sqlite3` CLI applies the migrations)
and on PostgreSQL (`psql`), analyzes both, then times each query as the store's code
writes it before and after this round (issue 40, migration 0034): medians of RUNS.
Not a fill through the insert path: it says what the queries cost on rollups of that
size, not what filling them costs.

Usage: bench/store-rollups.py          Environment: CRASHES (1000000), RUNS (7),
PG_URL (postgres://postgres@127.0.0.1:5432; a database is made and dropped), KEEP.
"""
import os, sqlite3, statistics, subprocess, sys, tempfile, time, collections, glob

N = int(os.environ.get("CRASHES", "1000000"))
RUNS = int(os.environ.get("RUNS", "7"))
PG_URL = os.environ.get("PG_URL", "postgres://postgres@127.0.0.1:5432")
S, DAYS, DAY = 5000, 90, 86400000
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def rollups(now):
    """The crashes' (signature, day, product, version) -> [count, first, last]."""
    span, step, m = DAYS * DAY, DAYS * DAY // N, (1 << 64) - 1
    x, days = 0x9E3779B97F4A7C15, collections.defaultdict(lambda: [0, None, None])
    for i in range(N):
        out = []
        for _ in range(2):
            x ^= x >> 12; x ^= (x << 25) & m; x ^= x >> 27
            out.append((x * 0x2545F4914F6CDD1D) & m)
        k = int(S * ((out[0] >> 11) / float(1 << 53)) ** 3)
        at = now - span + step * i
        r = days[(f"crash_site_{k} | caller_{k % 97} | main", at // DAY, f"App{k % 3}", f"1.{out[1] % 10}")]
        r[0] += 1; r[1] = at if r[1] is None else r[1]; r[2] = at
    return days


FILL = [
    """INSERT INTO crash_groups SELECT project, signature, SUM(count), MIN(first_seen),
       MAX(last_seen) FROM crash_group_days GROUP BY project, signature""",
    """INSERT INTO crash_group_running SELECT project, '', signature, day, n,
       SUM(n) OVER (PARTITION BY project, signature ORDER BY day), f, l FROM (SELECT project,
       signature, day, SUM(count) AS n, MIN(first_seen) AS f, MAX(last_seen) AS l
       FROM crash_group_days GROUP BY project, signature, day) d""",
    """INSERT INTO crash_group_running SELECT project, 'p:' || product, signature, day, n,
       SUM(n) OVER (PARTITION BY project, product, signature ORDER BY day), f, l FROM (SELECT
       project, product, signature, day, SUM(count) AS n, MIN(first_seen) AS f,
       MAX(last_seen) AS l FROM crash_group_days GROUP BY project, product, signature, day) d""",
    """INSERT INTO crash_group_kinds SELECT project, 'null-pointer', signature, day, product,
       version, count FROM crash_group_days""",
]


def groups_sql(since, scope, kind, new, pg):
    """The groups query of `dashboard::groups` (every project, most crashes first, 50
    rows): before (`new` false) and after this round."""
    def row(what, bound, order):
        b = f" AND r.day {bound}" if bound else ""
        return (f"(SELECT r.{what} FROM crash_group_running r WHERE r.project = {{a}}.project "
                f"AND r.scope = '{scope}' AND r.signature = {{a}}.signature{b} ORDER BY r.day {order} LIMIT 1)")
    count = "g.count" if scope == "" else f"COALESCE({row('running', None, 'DESC')}, 0)".format(a="g")
    count += f" - COALESCE({row('running', f'< {since}', 'DESC')}, 0)".format(a="g")
    test = ("EXISTS (SELECT 1 FROM crash_group_kinds k WHERE k.project = g.project AND "
            f"k.kind = 'null-pointer' AND k.signature = g.signature AND k.day >= {since}"
            + (f" AND k.product = '{scope[2:]}'" if scope else "") + ")")
    order = "g.count DESC, g.signature DESC, g.project DESC"
    w = f"SELECT g.project, g.signature, {count} AS count, 0 AS first_seen, 0 AS last_seen FROM crash_groups g"
    page = "SELECT project, signature, count, first_seen, last_seen FROM w g WHERE g.count > 0"
    t = ""
    if not new:
        page += (f" AND {test}" if kind else "") + f" ORDER BY {order} LIMIT 50"
    else:
        t = (f"t AS MATERIALIZED (SELECT g.count FROM (SELECT g.project, g.signature, {count} AS count "
             "FROM (SELECT project, signature, count FROM crash_groups ORDER BY count DESC LIMIT 200) g) g "
             f"WHERE g.count > 0{' AND ' + test if kind else ''} ORDER BY g.count DESC LIMIT 1 OFFSET 49), ")
        w += " WHERE g.count >= COALESCE((SELECT count FROM t), 0)"
        page += f" ORDER BY {order}"
        if kind:
            fence, again = (" OFFSET 0", f" ORDER BY {order}") if pg else (" LIMIT -1 OFFSET 0", "")
            page = f"SELECT project, signature, count, first_seen, last_seen FROM ({page}{fence}) g WHERE {test}{again}"
        page += " LIMIT 50"
    first = row("first_seen", f">= {since}", "ASC").format(a="p")
    last = row("last_seen", None, "DESC").format(a="p")
    return (f"WITH {t}w AS MATERIALIZED ({w}), page AS MATERIALIZED ({page}) SELECT project, signature, "
            f"count, first_seen, last_seen FROM (SELECT p.project, p.signature, p.count, {first} AS first_seen, "
            f"{last} AS last_seen FROM page p) l ORDER BY count DESC, signature DESC, project DESC")


def queries(now):
    d = lambda n: (now - n * DAY) // DAY
    out = []
    for name, since, scope, kind in [("groups, 30 days", d(30), "", False),
                                     ("groups, 90 days", d(90), "", False),
                                     ("groups, 90 days, one product", d(90), "p:App1", False),
                                     ("groups, 30 days, one kind", d(30), "", True)]:
        out.append((name, lambda pg, new, a=(since, scope, kind): groups_sql(*a, new, pg)))
    out.append(("jobs page's counts", lambda pg, new: (
        "SELECT status, CAST(SUM(count) AS BIGINT) FROM crash_status_counts GROUP BY status "
        "HAVING SUM(count) <> 0 ORDER BY status" if new else
        "SELECT status, COUNT(*) FROM crashes GROUP BY status ORDER BY status")))
    return out


def psql(db, sql, *args):
    return subprocess.run(["psql", "-qAt", "-v", "ON_ERROR_STOP=1", f"{PG_URL}/{db}", *args],
                          input=sql, text=True, capture_output=True, check=True).stdout


def main():
    work = tempfile.mkdtemp(prefix="pm-rollups-")
    path, pgdb = os.path.join(work, "store.db"), f"pm_rollups_{os.getpid()}"
    migrations = lambda d: "".join(open(f).read() + "\n" for f in sorted(glob.glob(f"{ROOT}/migrations/{d}/*.sql")))
    subprocess.run(["sqlite3", path], input=migrations("sqlite"), text=True, check=True)
    psql("postgres", f"CREATE DATABASE {pgdb}")
    try:
        psql(pgdb, migrations("postgres"))
        now = int(time.time() * 1000)
        t0 = time.time()
        rows = [(s, d, p, v, c, f, l) for (s, d, p, v), (c, f, l) in rollups(now).items()]
        db = sqlite3.connect(path)
        db.executemany("INSERT INTO crash_group_days VALUES ('default', ?, ?, ?, ?, ?, ?, ?)", rows)
        for sql in FILL:
            db.execute(sql)
        # the queue: a million finished crashes, one in a thousand failed (only the
        # columns and index the old count read; 0034's counts of them)
        db.execute("DROP TABLE IF EXISTS q")
        db.executemany("INSERT INTO crash_status_counts VALUES (?, 0, ?)",
                       [("done", N - N // 1000), ("failed", N // 1000)])
        db.commit()
        db.close()
        csv = os.path.join(work, "days.csv")
        with open(csv, "w") as f:
            for r in rows:
                f.write("default\t" + "\t".join(map(str, r)) + "\n")
        psql(pgdb, "", "-c", f"\\copy crash_group_days FROM '{csv}'")
        psql(pgdb, ";\n".join(FILL) + ";" + f"""
            INSERT INTO crash_status_counts VALUES ('done', 0, {N - N // 1000}), ('failed', 0, {N // 1000});""")
        print(f"{N} crashes' rollups ({len(rows)} day rows) filled in {time.time() - t0:.0f} s", flush=True)
        # the old count's queue, beside the store (a table of the same index)
        qsql = f"""CREATE TABLE q (id TEXT PRIMARY KEY, status TEXT NOT NULL, received_at BIGINT NOT NULL);
            CREATE INDEX q_queue ON q (status, received_at);"""
        subprocess.run(["sqlite3", path], text=True, check=True, input=qsql + f"""
            WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {N})
            INSERT INTO q SELECT printf('%032x', n * 2654435761), CASE WHEN n % 1000 = 0 THEN 'failed'
            ELSE 'done' END, n FROM g; PRAGMA optimize=0x10012;""")
        psql(pgdb, qsql + f"""INSERT INTO q SELECT md5(n::text), CASE WHEN n % 1000 = 0 THEN 'failed'
            ELSE 'done' END, n FROM generate_series(1, {N}) n; VACUUM ANALYZE;""")
        table(path, pgdb, now)
    finally:
        if not os.environ.get("KEEP"):
            psql("postgres", f"DROP DATABASE IF EXISTS {pgdb}")
        print(f"stores: {path} and {PG_URL}/{pgdb}" + ("" if os.environ.get("KEEP") else " (removed)"))


def table(path, pgdb, now):
    db = sqlite3.connect(path)
    print(f"SQLite {sqlite3.sqlite_version} (Python's), PostgreSQL {psql(pgdb, 'SHOW server_version').strip()}; "
          f"medians of {RUNS}")
    print(f"{'query':<32} {'SQLite before':>14} {'after':>8} {'PostgreSQL before':>18} {'after':>8}")
    for name, sql in queries(now):
        cells, results = [], []
        for pg in (False, True):
            for new in (False, True):
                text = sql(pg, new).replace("FROM crashes GROUP", "FROM q GROUP")
                times = []
                for _ in range(RUNS):
                    if pg:
                        out = psql(pgdb, "\\timing on\n" + text + ";")
                        times.append(float(out.strip().splitlines()[-1].split()[1]))
                        results.append("\n".join(out.strip().splitlines()[:-1]))
                    else:
                        t = time.perf_counter()
                        r = db.execute(text).fetchall()
                        times.append((time.perf_counter() - t) * 1e3)
                        results.append("\n".join("|".join(map(str, x)) for x in r))
                cells.append(statistics.median(times))
        # the same rows before and after, on both databases
        same = "" if len(set(results)) == 1 else "  ROWS DIFFER"
        print(f"{name:<32} {cells[0]:>12.1f}ms {cells[1]:>6.1f}ms {cells[2]:>16.1f}ms {cells[3]:>6.1f}ms{same}")


if __name__ == "__main__":
    sys.exit(main())
