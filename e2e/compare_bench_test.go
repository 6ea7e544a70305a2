package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkCompare is BenchmarkTransports's machinery on the comparison
// that matters to someone choosing: the 10-step workload through the
// bindings (Python and Node, over the socket and over libdbos.so in connect
// mode) beside the official SDKs, DBOS Python, DBOS Go and DBOS TypeScript,
// on the same Postgres server in one run, with the server's own ceiling,
// pgbench committing one one-row INSERT per transaction, measured in the
// same rounds:
//
//   - python/socket, python/lib-connect, dbos-python, dbos-go: as in
//     BenchmarkTransports;
//   - node/socket: the Node binding (bindings/node, built) over the agent's
//     socket, to a `dbos-agent serve` of its own;
//   - node/lib-connect: the same binding over libdbos.so in connect mode, to
//     a `dbos-agent serve` of its own (listed as missing, with the reason,
//     when the library is absent or the binding does not load it);
//   - dbos-ts: the official DBOS TypeScript (@dbos-inc/dbos-sdk, a
//     devDependency of bindings/node), the same runner with only its import
//     changed (bindings/node/bench/runner.mjs, which speaks
//     testdata/bench_runner.py's line protocol);
//   - pgbench: the ceiling, on a database of its own with a table of its
//     own (created and dropped by the benchmark): a custom script of one
//     INSERT of one row per transaction, pgbench -n -M prepared -c C
//     -j min(C,2) -T (the duration and warm-up in whole seconds, pgbench's
//     unit, at least 1), at each concurrency. It reports commits/s and
//     pgbench's latency average, the CPU of the pgbench process per commit,
//     and the CPU of its connections' backends per commit (their start
//     included): those backends end with the run, so their CPU is read as
//     what the postmaster collected from the children it reaped during the
//     measurement (its /proc stat's cutime and cstime), once every backend
//     seen serving the database is gone, less what its other children that
//     ended meanwhile (an idle connection a pool closed) had used by the
//     start; the table has autovacuum off, so that no worker of its own
//     adds to it. A missing pgbench is listed as missing, with where it was
//     looked for.
//
// The report has, per concurrency, each variant's steps/s (median of the
// rounds and range), the ratios of each variant to DBOS Go, DBOS Python and
// DBOS TypeScript (the median of per-round ratios, with their range), the
// step latency at c=1 (p50, p99) against pgbench's latency of one commit at
// c=1 (the ratio step p50 / commit latency), the CPU per step of the
// client, the agent and the variant's Postgres backends in µs beside
// pgbench's Postgres CPU per commit, and each variant's steps/s as a share
// of the ceiling's commits/s.
//
// Run it with -benchtime 1x (`make bench-compare`, which builds the library
// and the Node binding). Environment:
//
//	DBOS_BENCH_COMPARE_ROUNDS       rounds (default 3)
//	DBOS_BENCH_COMPARE_DURATION     each measurement (default 5s)
//	DBOS_BENCH_COMPARE_WARMUP       the warm-up before each (default 1s)
//	DBOS_BENCH_COMPARE_CONCURRENCY  workflows in flight (default 1,16,64)
//	DBOS_BENCH_COMPARE_VARIANTS     the variants to run (default those above; any of BenchmarkTransports's too)
//	DBOS_BENCH_COMPARE_JSON         a file to write every measurement to
//	DBOS_BENCH_DATABASE_URL         the base database URL (default bench_compare on localhost)
//	DBOS_BENCH_LIBRARY              libdbos.so (default ../cgo/libdbos.so)
//	DBOS_BENCH_PYTHON               as for BenchmarkTransports
//	DBOS_BENCH_NODE                 node (default the one on PATH)
//	DBOS_BENCH_PGBENCH              pgbench (default on PATH, else in pg_config --bindir, else the newest /usr/lib/postgresql/*/bin)
func BenchmarkCompare(b *testing.B) {
	runTransportsBench(b, transportsBench{
		name:      "BenchmarkCompare",
		envPrefix: "DBOS_BENCH_COMPARE_",
		defaultDB: "bench_compare",
		variants: []string{
			"python/socket", "python/lib-connect", "node/socket", "node/lib-connect",
			variantDBOSPython, variantDBOSGo, variantDBOSTS, variantPgbench,
		},
		references: []string{variantDBOSGo, variantDBOSPython, variantDBOSTS},
	})
}

// ---- the Node runner

// dbosTSPackage is the official DBOS TypeScript, a devDependency of
// bindings/node.
const dbosTSPackage = "@dbos-inc/dbos-sdk"

// startNodeRunner starts bindings/node/bench/runner.mjs with sdk (this
// binding, dbos-agent, or the official @dbos-inc/dbos-sdk) on databaseURL.
func startNodeRunner(cfg transportsConfig, sdk, databaseURL string, env []string) (*lineRunner, error) {
	if cfg.node == "" {
		return nil, errors.New("no node on PATH (Node.js 20 or later; or set DBOS_BENCH_NODE)")
	}
	// What `make bench-compare` builds and installs first.
	need := filepath.Join(cfg.nodePackage, "dist", "esm", "index.js")
	if sdk == dbosTSPackage {
		need = filepath.Join(cfg.nodePackage, "node_modules", sdk, "package.json")
	}
	if _, err := os.Stat(need); err != nil {
		return nil, fmt.Errorf("%s is not there: install and build bindings/node first (scripts/node-deps.sh; node scripts/build.mjs; make bench-compare does both)", need)
	}
	cmd := exec.Command(cfg.node, filepath.Join(cfg.nodePackage, "bench", "runner.mjs"), "--sdk", sdk, "--database-url", databaseURL)
	cmd.Dir = cfg.nodePackage
	cmd.Env = append(os.Environ(), env...)
	return startLineRunner(sdk, cmd, databaseURL)
}

func startDBOSTS(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	db, err := variantDatabase(b, cfg.baseURL, "dbos_ts")
	if err != nil {
		return nil, err
	}
	return startNodeRunner(cfg, dbosTSPackage, db, []string{"DBOS_AGENT_SOCKET=", "DBOS_AGENT_LIBRARY=", "DBOS_AGENT_MODE="})
}

// ---- the ceiling: pgbench

// findPgbench is pgbench on PATH, else in pg_config's bindir, else in the
// newest of Debian's /usr/lib/postgresql/<version>/bin; empty when none is.
func findPgbench() string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "pgbench"); isFile(p) {
			return p
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	slices.SortFunc(found, func(a, b string) int { return pgVersionOf(a) - pgVersionOf(b) })
	if len(found) > 0 {
		return found[len(found)-1]
	}
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// pgVersionOf is the major version in /usr/lib/postgresql/<version>/bin/....
func pgVersionOf(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// pgbenchTable is the ceiling's table: one row per transaction.
const pgbenchTable = "commit_ceiling"

// pgbenchRunner runs the ceiling's measurements: a pgbench process per run.
type pgbenchRunner struct {
	pgbench    string
	db         string
	script     string // the custom script's file
	postmaster int    // the backends' parent, which reaps them
	ver        string
	committed  int // transactions pgbench counted, warm-ups included
}

func startPgbench(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	if cfg.pgbench == "" {
		return nil, errors.New("no pgbench: not on PATH, not in pg_config --bindir, not in /usr/lib/postgresql/*/bin (Debian's postgresql-15 ships it; or set DBOS_BENCH_PGBENCH)")
	}
	out, err := exec.Command(cfg.pgbench, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", cfg.pgbench, err)
	}
	db, err := variantDatabase(b, cfg.baseURL, "pgbench")
	if err != nil {
		return nil, err
	}
	r := &pgbenchRunner{pgbench: cfg.pgbench, db: db, ver: strings.TrimSpace(string(out))}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	// A small table: an identity key (so each insert updates an index, as
	// a step record does) and a short text value.
	create := "CREATE TABLE " + pgbenchTable + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text NOT NULL) WITH (autovacuum_enabled = off)"
	if _, err := conn.Exec(ctx, create); err != nil {
		return nil, fmt.Errorf("%s: %w", create, err)
	}
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return nil, err
	}
	if r.postmaster = parentPID(backend); r.postmaster <= 1 {
		return nil, fmt.Errorf("the Postgres backend %d has no postmaster this host shows (a server elsewhere?): its CPU cannot be measured", backend)
	}
	r.script = filepath.Join(b.TempDir(), "insert.sql")
	if err := os.WriteFile(r.script, []byte("INSERT INTO "+pgbenchTable+" (v) VALUES ('x');\n"), 0o644); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *pgbenchRunner) database() string { return r.db }
func (r *pgbenchRunner) version() string  { return r.ver + ", one-row INSERT per transaction" }
func (r *pgbenchRunner) close()           {}

// pgbenchSeconds is d in pgbench's -T unit, whole seconds, at least 1.
func pgbenchSeconds(d time.Duration) int { return max(1, int(d.Round(time.Second)/time.Second)) }

// pgbenchRun is what one pgbench run reported.
type pgbenchRun struct {
	transactions int
	tps          float64       // without the initial connection time
	latency      time.Duration // pgbench's latency average
	cpu          time.Duration // the pgbench process's own (all its threads)
}

var (
	pgbenchTransactionsRE = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	pgbenchFailedRE       = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
	pgbenchLatencyRE      = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	pgbenchTPSRE          = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
)

// run is one pgbench run of seconds with c connections.
func (r *pgbenchRunner) run(c, seconds int) (pgbenchRun, error) {
	cmd := exec.Command(r.pgbench, "-n", "-M", "prepared", "-f", r.script,
		"-c", strconv.Itoa(c), "-j", strconv.Itoa(min(c, 2)), "-T", strconv.Itoa(seconds), r.db)
	stderr := &tailBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return pgbenchRun{}, fmt.Errorf("pgbench: %w: %s", err, stderr.last())
	}
	text := string(out)
	field := func(re *regexp.Regexp) (string, error) {
		m := re.FindStringSubmatch(text)
		if m == nil {
			return "", fmt.Errorf("pgbench's output has no %q line:\n%s", re, text)
		}
		return m[1], nil
	}
	var res pgbenchRun
	s, err := field(pgbenchTransactionsRE)
	if err != nil {
		return pgbenchRun{}, err
	}
	res.transactions, _ = strconv.Atoi(s)
	if m := pgbenchFailedRE.FindStringSubmatch(text); m != nil && m[1] != "0" {
		return pgbenchRun{}, fmt.Errorf("pgbench: %s transactions failed:\n%s", m[1], text)
	}
	if s, err = field(pgbenchLatencyRE); err != nil {
		return pgbenchRun{}, err
	}
	ms, _ := strconv.ParseFloat(s, 64)
	res.latency = time.Duration(ms * float64(time.Millisecond))
	if s, err = field(pgbenchTPSRE); err != nil {
		return pgbenchRun{}, err
	}
	res.tps, _ = strconv.ParseFloat(s, 64)
	res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.committed += res.transactions
	return res, nil
}

func (r *pgbenchRunner) measure(cfg transportsConfig, c int) (transportMeasurement, error) {
	if _, _, err := r.runReaped(c, pgbenchSeconds(cfg.warmup)); err != nil {
		return transportMeasurement{}, fmt.Errorf("warm-up: %w", err)
	}
	res, used, err := r.runReaped(c, pgbenchSeconds(cfg.duration))
	if err != nil {
		return transportMeasurement{}, err
	}
	elapsed := time.Duration(float64(res.transactions) / res.tps * float64(time.Second))
	m, err := measurementOf(used, res.transactions, elapsed)
	if err != nil {
		return transportMeasurement{}, err
	}
	m.commitLatency = res.latency
	return m, nil
}

// runReaped is one run and its CPU: the pgbench process's, and its
// backends', which end with the run. Their CPU is what the postmaster reaped
// during the run (its children's times), read once every backend seen
// serving the database is gone, less the CPU of its other children that
// ended meanwhile (an idle connection a pool closed: its whole life's CPU is
// reaped with it), as they had used it at the start.
func (r *pgbenchRunner) runReaped(c, seconds int) (pgbenchRun, cpuUsed, error) {
	startChildren, reapedBefore, err := postmasterChildren(r.postmaster)
	if err != nil {
		return pgbenchRun{}, cpuUsed{}, err
	}
	// The snapshot follows the host and finds the run's backends.
	cpu, err := newCPUSnapshot(r.db, nil, nil)
	if err != nil {
		return pgbenchRun{}, cpuUsed{}, err
	}
	res, runErr := r.run(c, seconds)
	used, err := cpu.since()
	if runErr != nil {
		return pgbenchRun{}, cpuUsed{}, runErr
	}
	if err != nil {
		return pgbenchRun{}, cpuUsed{}, err
	}
	if used.backends == 0 {
		return pgbenchRun{}, cpuUsed{}, fmt.Errorf("no backend of %s found by its process title while pgbench ran (update_process_title off?)", r.db)
	}
	if err := waitReaped(slices.Collect(maps.Keys(cpu.last))); err != nil {
		return pgbenchRun{}, cpuUsed{}, err
	}
	endChildren, reapedAfter, err := postmasterChildren(r.postmaster)
	if err != nil {
		return pgbenchRun{}, cpuUsed{}, err
	}
	var others time.Duration
	for pid, cpu := range startChildren {
		if _, ok := endChildren[pid]; !ok {
			others += cpu
		}
	}
	// What the sampler saw of the backends while they ran is a floor.
	used.postgres = max(used.postgres, reapedAfter-reapedBefore-others)
	used.client = res.cpu
	return res, used, nil
}

// postmasterChildren are the postmaster's children with the CPU each has
// used, and the CPU of the children it has reaped, read together: the same
// children before and after the reaped figure, so that no child ended
// between the two readings.
func postmasterChildren(pm int) (map[int]time.Duration, time.Duration, error) {
	for range 100 {
		children := map[int]time.Duration{}
		for _, pid := range childPIDs(pm) {
			children[pid] = processCPU(pid)
		}
		reaped := reapedChildrenCPU(pm)
		after := childPIDs(pm)
		if len(after) == 0 {
			return nil, 0, fmt.Errorf("no children of the postmaster (pid %d) in /proc: its backends' CPU cannot be measured", pm)
		}
		same := len(after) == len(children)
		for _, pid := range after {
			_, was := children[pid]
			same = same && was
		}
		if same {
			return children, reaped, nil
		}
	}
	return nil, 0, fmt.Errorf("the postmaster's (pid %d) children kept changing while read", pm)
}

// checkDurable: the table holds one row for each transaction pgbench
// counted as committed.
func (r *pgbenchRunner) checkDurable() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgbenchTable).Scan(&rows); err != nil {
		return err
	}
	if rows != r.committed {
		return fmt.Errorf("pgbench counted %d transactions, but its table has %d rows", r.committed, rows)
	}
	fmt.Printf("  %-20s %d transactions, %d rows in its table, as it counted\n", variantPgbench, r.committed, rows)
	return nil
}

// waitReaped waits until none of pids is a process any more: a backend that
// exited is a zombie, with its /proc entry, until the postmaster reaps it
// and adds its CPU to its children's.
func waitReaped(pids []int) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the Postgres backend %d did not end within 30s of pgbench", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// parentPID is a process's parent (field 4), 0 when unknown.
func parentPID(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}
