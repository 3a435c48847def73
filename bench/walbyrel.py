"""WAL between two LSNs, by relation and record type, per job.

usage: python3 walbyrel.py START_LSN END_LSN DATABASE_URL JOBS

Runs pg_waldump (as the postgres user) on $PG_WAL (default the breakdown's
private cluster, /tmp/lh-pgss/data/pg_wal) and names each relfilenode from
the database at DATABASE_URL, which must still exist (bench -keep). See
BREAKDOWN.md.
"""
import collections, os, re, subprocess, sys
start, end, dburl = sys.argv[1], sys.argv[2], sys.argv[3]
waldir = os.environ.get("PG_WAL", "/tmp/lh-pgss/data/pg_wal")
waldump = os.environ.get("PG_WALDUMP", "/usr/lib/postgresql/15/bin/pg_waldump")
names = {}
out = subprocess.run(["psql", dburl, "-AtF|", "-c", "select pg_relation_filenode(oid), relname from pg_class where pg_relation_filenode(oid) is not null"], capture_output=True, text=True).stdout
for line in out.splitlines():
    fn, name = line.split("|")
    names[fn] = name
p = subprocess.run(["runuser", "-u", "postgres", "--", waldump, "-p", waldir, "-s", start, "-e", end], capture_output=True, text=True).stdout
rx = re.compile(r"rmgr: (\S+)\s+len \(rec/tot\):\s+(\d+)/\s*(\d+), .*? desc: (\S+)(.*)")
n = collections.Counter(); b = collections.Counter()
for line in p.splitlines():
    m = rx.match(line)
    if not m: continue
    rm, rec, tot, desc, rest = m.groups()
    rel = re.search(r"blkref #0: rel \d+/\d+/(\d+)", rest)
    relname = names.get(rel.group(1), "oid " + rel.group(1)) if rel else "-"
    k = (relname, rm + "/" + desc)
    n[k] += 1; b[k] += int(tot)
jobs = int(sys.argv[4])
tot_b = sum(b.values())
print(f"{'relation':<28} {'record':<22} {'count':>8} {'per job':>8} {'bytes/job':>9}")
byrel = collections.Counter()
for k, c in sorted(n.items(), key=lambda kv: -b[kv[0]]):
    byrel[k[0]] += b[k]
    if b[k] / jobs < 5: continue
    print(f"{k[0]:<28} {k[1]:<22} {c:>8} {c/jobs:>8.2f} {b[k]/jobs:>9.1f}")
print(f"total {tot_b/jobs:.1f} bytes/job")
print("\nper relation, bytes/job:")
for r, v in byrel.most_common():
    if v / jobs >= 1: print(f"  {r:<28} {v/jobs:8.1f}")
