package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"

	"github.com/dbos-agent/dbos-agent/sysdb"
)

// BenchmarkTransports runs one workload, workflows of 10 trivial steps (as
// BenchmarkStepRecord), through every way an application reaches DBOS, in
// one run on the same Postgres, and prints steps/s at each number of
// workflows in flight, the step latency at one in flight (median and p99),
// the ratios to the official SDKs, and the CPU each measurement cost:
//
//   - python/socket: the Python binding (dbos_agent) over the agent's Unix
//     socket, to a `dbos-agent serve` of its own;
//   - python/lib-embedded, python/lib-sidecar, python/lib-connect: the same
//     binding over libdbos.so in each of its modes (cgo/README.md): the
//     engine in the Python process; a private agent child the library
//     starts; the library as a transport to a `dbos-agent serve` of its own;
//   - dbos-python: the official DBOS Python (the test venv's `dbos`), the
//     same program with only its import changed;
//   - dbos-go: the official DBOS Go SDK, in this process;
//   - python/socket-sqlite and dbos-python-sqlite: python/socket and
//     dbos-python again on one SQLite file (a temporary directory's), which
//     both open: the agent serves it, DBOS Python runs on it directly.
//
// Each variant has a system database of its own on the same server (named
// after DBOS_BENCH_DATABASE_URL's, plus the variant), created fresh and
// dropped at the end. The Python variants are long-lived processes
// (testdata/bench_runner.py) that launch once and then serve measurements,
// so the variants can be interleaved: each round measures every variant at
// each concurrency, the variants in an order rotated every round, so that a
// shared, noisy machine biases them alike; the figures are the medians of
// the rounds, with their ranges. A measurement starts workflows for
// DBOS_BENCH_TRANSPORTS_DURATION after a warm-up and counts the steps of
// those that ended, over the time until the last one ended; the latency is
// each step call's duration inside the workflow (the call to the step's
// return, which includes recording it).
//
// A library variant runs when the library exists (DBOS_BENCH_LIBRARY, else
// cgo/libdbos.so from `make lib`) and the binding in the runner really
// loads it (the runner's memory maps are checked); otherwise it is listed
// as missing with the reason, never replaced by another transport.
//
// Run it with -benchtime 1x (`make bench-transports`). Environment:
//
//	DBOS_BENCH_TRANSPORTS_ROUNDS       rounds (default 3)
//	DBOS_BENCH_TRANSPORTS_DURATION     each measurement (default 5s)
//	DBOS_BENCH_TRANSPORTS_WARMUP       the warm-up before each (default 1s)
//	DBOS_BENCH_TRANSPORTS_CONCURRENCY  workflows in flight (default 1,16,64)
//	DBOS_BENCH_TRANSPORTS_VARIANTS     the variants to run (default those above; any of BenchmarkCompare's too,
//	                                   and python/socket-alt: python/socket with DBOS_BENCH_AGENT_ALT_ARGS)
//	DBOS_BENCH_AGENT_ARGS              flags added to every benchmark agent's (space-separated)
//	DBOS_BENCH_AGENT_ALT_ARGS          flags added to python/socket-alt's agent only
//	DBOS_BENCH_TRANSPORTS_JSON         a file to write every measurement to
//	DBOS_BENCH_DATABASE_URL            the base database URL (default bench_transports on localhost)
//	DBOS_BENCH_LIBRARY                 libdbos.so (default ../cgo/libdbos.so)
//	DBOS_BENCH_PYTHON                  an interpreter with dbos and dbos_agent (default the repo's .venv, made by scripts/python-venv.sh)
//	DBOS_AGENT_BINARY                  the sidecar mode's agent (default the one this benchmark builds)
func BenchmarkTransports(b *testing.B) {
	runTransportsBench(b, transportsBench{
		name:      "BenchmarkTransports",
		envPrefix: "DBOS_BENCH_TRANSPORTS_",
		defaultDB: "bench_transports",
		variants: []string{
			"python/socket", "python/lib-embedded", "python/lib-sidecar", "python/lib-connect",
			variantDBOSPython, variantDBOSGo, variantSocketSQLite, variantDBOSPythonSQLite,
		},
		references: []string{variantDBOSPython, variantDBOSGo, variantDBOSPythonSQLite, "python/socket"},
	})
}

// transportsBench is one benchmark of the variants: which it runs unless
// told otherwise, the environment variables that size it, and the
// references its ratios are to.
type transportsBench struct {
	name       string
	envPrefix  string // ROUNDS, DURATION, ... follow it
	defaultDB  string // DBOS_BENCH_DATABASE_URL's database when unset
	variants   []string
	references []string
}

// runTransportsBench starts the benchmark's variants, measures them in
// interleaved rounds, checks that each did the durable work it reports, and
// prints (and writes, when asked) the figures.
func runTransportsBench(b *testing.B, bench transportsBench) {
	cfg := transportsConfigFromEnv(b, bench)
	variants := transportVariants(cfg)
	fmt.Printf("%s: 10-step workflows, %d round(s), %s per measurement after a %s warm-up, in flight %v; load average %s\n",
		cfg.name, cfg.rounds, cfg.duration, cfg.warmup, cfg.concurrency, loadAverage())
	defer func() { fmt.Printf("%s: load average at the end %s\n", cfg.name, loadAverage()) }()

	// Start every variant first (launch is not measured).
	for _, v := range variants {
		if v.missing != "" {
			continue
		}
		r, err := v.start(b, cfg)
		if err != nil {
			v.missing = err.Error()
			if !v.optional() {
				b.Errorf("%s: %v", v.name, err)
			}
			continue
		}
		v.runner = r
		v.version = r.version()
		b.Cleanup(r.close)
		fmt.Printf("  %-20s %s\n", v.name, v.version)
	}

	for round := 0; round < cfg.rounds; round++ {
		for _, c := range cfg.concurrency {
			for i := range variants {
				v := variants[(i+round)%len(variants)]
				if v.runner == nil || v.failed != "" {
					continue
				}
				m, err := measureVariant(v, cfg, c)
				if err != nil {
					v.failed = fmt.Sprintf("round %d, c=%d: %v", round+1, c, err)
					b.Errorf("%s failed: %s", v.name, v.failed)
					continue
				}
				m.round = round + 1
				v.results[c] = append(v.results[c], m)
				unit := "steps/s"
				if v.ceiling {
					unit = "commits/s"
				}
				fmt.Printf("  round %d c=%-3d %-20s %8.0f %-9s (host CPU %3.0f%%)\n", round+1, c, v.name, m.stepsPerSec, unit, m.hostBusyPct)
			}
		}
	}
	// Every variant did the same durable work: each workflow it ran is
	// SUCCESS in its database, with its 10 steps recorded. The SQLite
	// variants share one file, checked once for all of them. The ceiling
	// checks its own rows.
	var databases []string
	sharing := map[string][]*transportVariant{}
	for _, v := range variants {
		if v.runner == nil {
			continue
		}
		if d, ok := v.runner.(durableChecker); ok {
			if err := d.checkDurable(); err != nil {
				b.Errorf("%s: %v", v.name, err)
			}
			continue
		}
		db := v.runner.database()
		if sharing[db] == nil {
			databases = append(databases, db)
		}
		sharing[db] = append(sharing[db], v)
	}
	for _, db := range databases {
		if err := checkDurable(db, sharing[db]); err != nil {
			b.Error(err)
		}
	}
	printTransportsReport(os.Stdout, cfg, variants)
	if cfg.jsonPath != "" {
		if err := writeTransportsJSON(cfg.jsonPath, cfg, variants); err != nil {
			b.Error(err)
		}
	}
}

type transportsConfig struct {
	name             string // the benchmark's, for its report
	references       []string
	rounds           int
	duration, warmup time.Duration
	concurrency      []int
	only             map[string]bool
	jsonPath         string
	baseURL          string
	library          string
	python           string
	runnerScript     string
	node             string // the Node variants' node (empty: none found)
	nodePackage      string // bindings/node: its runner, build and dependencies
	pgbench          string // the ceiling's pgbench (empty: none found)
	sqliteFile       string // the SQLite variants' system database
}

func transportsConfigFromEnv(b *testing.B, bench transportsBench) transportsConfig {
	p := bench.envPrefix
	cfg := transportsConfig{
		name:         bench.name,
		references:   bench.references,
		rounds:       envInt(p+"ROUNDS", 3),
		duration:     envDuration(b, p+"DURATION", 5*time.Second),
		warmup:       envDuration(b, p+"WARMUP", time.Second),
		concurrency:  []int{1, 16, 64},
		only:         map[string]bool{},
		jsonPath:     os.Getenv(p + "JSON"),
		baseURL:      os.Getenv("DBOS_BENCH_DATABASE_URL"),
		library:      os.Getenv("DBOS_BENCH_LIBRARY"),
		python:       os.Getenv("DBOS_BENCH_PYTHON"),
		runnerScript: "testdata/bench_runner.py",
		node:         os.Getenv("DBOS_BENCH_NODE"),
		nodePackage:  "../bindings/node",
		pgbench:      os.Getenv("DBOS_BENCH_PGBENCH"),
		sqliteFile:   filepath.Join(b.TempDir(), "bench.sqlite"),
	}
	if s := os.Getenv(p + "CONCURRENCY"); s != "" {
		cfg.concurrency = nil
		for _, f := range strings.Split(s, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || c < 1 {
				b.Fatalf("%sCONCURRENCY: %q is not a positive integer", p, f)
			}
			cfg.concurrency = append(cfg.concurrency, c)
		}
	}
	names := bench.variants
	if s := os.Getenv(p + "VARIANTS"); s != "" {
		names = strings.Split(s, ",")
	}
	runtimes := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(allTransportVariants(), func(v *transportVariant) bool { return v.name == n })
		if i < 0 {
			b.Fatalf("%sVARIANTS: no variant %q", p, n)
		}
		cfg.only[n] = true
		runtimes[allTransportVariants()[i].runtime] = true
	}
	if cfg.baseURL == "" {
		cfg.baseURL = "postgres://postgres:dbos@localhost:5432/" + bench.defaultDB + "?sslmode=disable"
	}
	if cfg.library == "" {
		cfg.library = "../cgo/libdbos.so"
	}
	if cfg.python == "" && runtimes[runtimePython] {
		// The repo's test venv, made (or brought up to date) as the
		// Python tests make it: it has dbos_agent and the official dbos.
		venv := exec.Command("bash", "../scripts/python-venv.sh", "test")
		venv.Stdout, venv.Stderr = os.Stderr, os.Stderr
		if err := venv.Run(); err != nil {
			b.Fatalf("scripts/python-venv.sh test: %v", err)
		}
		cfg.python = "../.venv/bin/python"
	}
	if cfg.node == "" {
		cfg.node, _ = exec.LookPath("node") // none: the Node variants say so
	}
	if cfg.pgbench == "" {
		cfg.pgbench = findPgbench()
	}
	for _, p := range []*string{&cfg.library, &cfg.python, &cfg.runnerScript, &cfg.nodePackage} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			b.Fatal(err)
		}
		*p = abs
	}
	if runtimes[runtimePython] {
		if _, err := os.Stat(cfg.python); err != nil {
			b.Fatalf("no Python at %s (DBOS_BENCH_PYTHON): %v", cfg.python, err)
		}
	}
	return cfg
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		b.Fatalf("%s: %q is not a positive duration", name, s)
	}
	return d
}

// transportVariant is one way of running the workload, and what it measured.
type transportVariant struct {
	name    string
	runtime string // what it runs in: runtimePython, runtimeNode, or none to set up
	library bool   // a libdbos.so mode: missing, not failing, when absent
	ceiling bool   // not the workload: pgbench's commits, the ceiling (missing, not failing, without pgbench)
	start   func(b *testing.B, cfg transportsConfig) (transportRunner, error)
	runner  transportRunner
	version string
	noAgent string // what the agent column says when no process is the agent
	ran     int    // workflows that ended, warm-ups included
	missing string // why it did not run at all
	failed  string // why it stopped running
	results map[int][]transportMeasurement
}

// optional variants are listed as missing, with the reason, when what they
// need is absent; the others fail the benchmark.
func (v *transportVariant) optional() bool { return v.library || v.ceiling }

// The reference variants, by name.
const (
	variantDBOSPython = "dbos-python"
	variantDBOSGo     = "dbos-go"
	variantDBOSTS     = "dbos-ts"
	// The SQLite variants share one file (cfg.sqliteFile): the agent serves
	// it, and DBOS Python opens the same file, as an app beside the agent
	// would; the interleaving keeps one of them idle while the other runs.
	variantSocketSQLite     = "python/socket-sqlite"
	variantDBOSPythonSQLite = "dbos-python-sqlite"
	variantPgbench          = "pgbench"
)

// What a variant runs in, set up only when a variant selected needs it.
const (
	runtimePython = "python"
	runtimeNode   = "node"
)

// allTransportVariants are every variant either benchmark can run, in the
// order the reports list them.
func allTransportVariants() []*transportVariant {
	return []*transportVariant{
		{name: "python/socket", runtime: runtimePython, start: startBindingSocket(pythonBinding, "socket")},
		{name: variantSocketAlt, runtime: runtimePython, start: startPythonSocketAlt},
		{name: "python/lib-embedded", runtime: runtimePython, library: true, start: startBindingLibrary(pythonBinding, "lib_embedded", "embedded"), noAgent: "in client"},
		{name: "python/lib-sidecar", runtime: runtimePython, library: true, start: startBindingLibrary(pythonBinding, "lib_sidecar", "sidecar")},
		{name: "python/lib-connect", runtime: runtimePython, library: true, start: startBindingLibrary(pythonBinding, "lib_connect", "connect")},
		{name: "node/socket", runtime: runtimeNode, start: startBindingSocket(nodeBinding, "node_socket")},
		{name: "node/lib-connect", runtime: runtimeNode, library: true, start: startBindingLibrary(nodeBinding, "node_lib_connect", "connect")},
		{name: variantDBOSPython, runtime: runtimePython, start: startDBOSPython, noAgent: "none"},
		{name: variantDBOSGo, start: startDBOSGo, noAgent: "none"},
		{name: variantDBOSTS, runtime: runtimeNode, start: startDBOSTS, noAgent: "none"},
		{name: variantSocketSQLite, runtime: runtimePython, start: startPythonSocketSQLite},
		{name: variantDBOSPythonSQLite, runtime: runtimePython, start: startDBOSPythonSQLite, noAgent: "none"},
		{name: variantPgbench, ceiling: true, start: startPgbench},
	}
}

func transportVariants(cfg transportsConfig) []*transportVariant {
	var out []*transportVariant
	for _, v := range allTransportVariants() {
		if !cfg.only[v.name] {
			continue
		}
		v.results = map[int][]transportMeasurement{}
		if v.library {
			if _, err := os.Stat(cfg.library); err != nil {
				v.missing = fmt.Sprintf("no library at %s (make lib, or set DBOS_BENCH_LIBRARY)", cfg.library)
			}
		}
		out = append(out, v)
	}
	return out
}

// transportRunner is a started variant.
type transportRunner interface {
	// database is the variant's system database.
	database() string
	// version names the SDK or binding and its version.
	version() string
	close()
}

// workloadRunner runs the workload for measurements (every variant but the
// ceiling).
type workloadRunner interface {
	transportRunner
	// run starts workflows with concurrency in flight for d and reports
	// when the last ended.
	run(concurrency int, d time.Duration, latencies bool) (runResult, error)
	// processes are the pids whose CPU counts as the client's and the
	// agent's (the agent's may be empty: it runs in the client).
	processes() (client, agent []int)
}

// selfMeasuring runners take their measurements themselves (the ceiling:
// its client and backends live only as long as each run).
type selfMeasuring interface {
	transportRunner
	measure(cfg transportsConfig, concurrency int) (transportMeasurement, error)
}

// durableChecker runners check their durable work themselves, not as a
// system database's workflows and steps.
type durableChecker interface {
	checkDurable() error
}

type runResult struct {
	elapsed   time.Duration
	workflows int
	steps     []time.Duration // each step call, when asked for
}

// transportMeasurement is one measurement of a variant at one concurrency.
// For the ceiling, a step is one commit.
type transportMeasurement struct {
	round         int
	stepsPerSec   float64
	p50, p99      time.Duration // at concurrency 1 only
	commitLatency time.Duration // the ceiling's: pgbench's latency average
	clientCPU     time.Duration // per step
	agentCPU      time.Duration
	postgresCPU   time.Duration // the backends serving the variant's database
	backends      int           // how many backends that is
	hostBusyPct   float64       // of all cores, everything on the machine
	otherBusyPct  float64       // what is not the client, agent or these backends
}

func measureVariant(v *transportVariant, cfg transportsConfig, c int) (transportMeasurement, error) {
	if r, ok := v.runner.(selfMeasuring); ok {
		return r.measure(cfg, c)
	}
	r := v.runner.(workloadRunner)
	warm, err := r.run(c, cfg.warmup, false)
	if err != nil {
		return transportMeasurement{}, fmt.Errorf("warm-up: %w", err)
	}
	v.ran += warm.workflows
	clientPIDs, agentPIDs := r.processes()
	cpu, err := newCPUSnapshot(r.database(), clientPIDs, agentPIDs)
	if err != nil {
		return transportMeasurement{}, err
	}
	res, err := r.run(c, cfg.duration, c == 1)
	if err != nil {
		return transportMeasurement{}, err
	}
	v.ran += res.workflows
	used, err := cpu.since()
	if err != nil {
		return transportMeasurement{}, err
	}
	m, err := measurementOf(used, res.workflows*stepsPerWorkflow, res.elapsed)
	if err != nil {
		return transportMeasurement{}, err
	}
	if len(res.steps) > 0 {
		slices.Sort(res.steps)
		m.p50, m.p99 = percentile(res.steps, 0.50), percentile(res.steps, 0.99)
	}
	return m, nil
}

// measurementOf is the rate and the CPU per step of steps done in elapsed.
func measurementOf(used cpuUsed, steps int, elapsed time.Duration) (transportMeasurement, error) {
	if steps == 0 {
		return transportMeasurement{}, errors.New("no workflow ended")
	}
	m := transportMeasurement{stepsPerSec: float64(steps) / elapsed.Seconds()}
	m.clientCPU = used.client / time.Duration(steps)
	m.agentCPU = used.agent / time.Duration(steps)
	m.postgresCPU, m.backends = used.postgres/time.Duration(steps), used.backends
	m.hostBusyPct = 100 * used.hostBusy.Seconds() / used.hostCapacity.Seconds()
	// Counters in 10 ms ticks, read at slightly different instants, can
	// put the processes' sum a little above the host's.
	m.otherBusyPct = max(0, 100*(used.hostBusy-used.client-used.agent-used.postgres).Seconds()/used.hostCapacity.Seconds())
	return m, nil
}

// checkDurable checks that the variant's database holds every workflow it
// ran, SUCCESS, and their steps (waiting a little for outcomes committed
// after the call returned).
func checkDurable(database string, variants []*transportVariant) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ran, names := 0, make([]string, len(variants))
	for i, v := range variants {
		ran += v.ran
		names[i] = v.name
	}
	who := strings.Join(names, " and ")
	count, closeDB, err := durableCounter(ctx, database)
	if err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	defer closeDB()
	for {
		workflows, steps, err := count()
		if err != nil {
			return fmt.Errorf("%s: count its workflows: %w", who, err)
		}
		if workflows == ran && steps == ran*stepsPerWorkflow {
			fmt.Printf("  %-20s %d workflows SUCCESS and %d steps recorded in its database, as it ran\n", who, workflows, steps)
			return nil
		}
		if workflows > ran || ctx.Err() != nil {
			return fmt.Errorf("%s: ran %d workflows, but its database has %d SUCCESS and %d steps", who, ran, workflows, steps)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// durableCounter counts the SUCCESS workflows and the recorded steps of a
// variant's system database: a Postgres URL's dbos schema, or a SQLite file.
func durableCounter(ctx context.Context, database string) (count func() (workflows, steps int, err error), closeDB func(), err error) {
	const query = `SELECT (SELECT count(*) FROM %sworkflow_status WHERE status = 'SUCCESS'), (SELECT count(*) FROM %soperation_outputs)`
	target, err := sysdb.ParseTarget(database)
	if err != nil {
		return nil, nil, err
	}
	if target.Kind == sysdb.KindSQLite {
		db, err := sql.Open("sqlite", "file:"+target.Path+"?mode=ro&_pragma=busy_timeout(30000)")
		if err != nil {
			return nil, nil, err
		}
		return func() (int, int, error) {
			var w, s int
			err := db.QueryRowContext(ctx, fmt.Sprintf(query, "", "")).Scan(&w, &s)
			return w, s, err
		}, func() { _ = db.Close() }, nil
	}
	conn, err := pgx.Connect(ctx, database)
	if err != nil {
		return nil, nil, err
	}
	return func() (int, int, error) {
		var w, s int
		err := conn.QueryRow(ctx, fmt.Sprintf(query, "dbos.", "dbos.")).Scan(&w, &s)
		return w, s, err
	}, func() { _ = conn.Close(ctx) }, nil
}

// ---- the variants' databases and agents

// variantDatabase creates a fresh database for a variant beside the base
// URL's (its name plus suffix) and drops it when the benchmark ends.
func variantDatabase(b *testing.B, base, suffix string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("DBOS_BENCH_DATABASE_URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/") + "_" + suffix
	admin := *u
	admin.Path = "/postgres"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return "", fmt.Errorf("connect to create %s: %w", name, err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	for _, q := range []string{"DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)", "CREATE DATABASE " + ident} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin.String())
		if err != nil {
			b.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			b.Errorf("drop %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String(), nil
}

// startBenchAgent runs `dbos-agent serve` on a variant's database, as users
// run it (info logs, the default intervals).
func startBenchAgent(b *testing.B, databaseURL string, extraArgs ...string) (*agentProc, error) {
	dir, err := os.MkdirTemp("", "bench")
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{t: b, url: databaseURL, schema: "dbos", dir: dir}
	return e.startAgent(agentOptions{extraArgs: append(benchAgentArgs(), extraArgs...)}), nil
}

// variantSocketAlt is python/socket with DBOS_BENCH_AGENT_ALT_ARGS added to
// its agent's flags: an agent setting measured against the default in one
// interleaved run (its ratios are to python/socket).
const variantSocketAlt = "python/socket-alt"

func startPythonSocketAlt(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	alt := strings.Fields(os.Getenv("DBOS_BENCH_AGENT_ALT_ARGS"))
	if len(alt) == 0 {
		return nil, errors.New("set DBOS_BENCH_AGENT_ALT_ARGS to the agent flags it measures")
	}
	db, err := variantDatabase(b, cfg.baseURL, "socket_alt")
	if err != nil {
		return nil, err
	}
	return bindingOverSocket(b, cfg, pythonBinding, db, alt...)
}

// binding is a dbos-agent binding the workload runs through: its runner
// process, started with the SDK name its runner takes.
type binding struct {
	sdk   string
	start func(cfg transportsConfig, sdk, databaseURL string, env []string) (*lineRunner, error)
}

var (
	pythonBinding = binding{sdk: "dbos_agent", start: startPythonRunner}
	nodeBinding   = binding{sdk: "dbos-agent", start: startNodeRunner}
)

// startBindingSocket is a variant of the binding over the agent's socket, to
// a `dbos-agent serve` of its own on a fresh database (suffix names it).
func startBindingSocket(bind binding, suffix string) func(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	return func(b *testing.B, cfg transportsConfig) (transportRunner, error) {
		db, err := variantDatabase(b, cfg.baseURL, suffix)
		if err != nil {
			return nil, err
		}
		return bindingOverSocket(b, cfg, bind, db)
	}
}

// bindingOverSocket runs the binding over the socket of a `dbos-agent
// serve` of its own on db, whatever the environment says of a library.
func bindingOverSocket(b *testing.B, cfg transportsConfig, bind binding, db string, agentArgs ...string) (transportRunner, error) {
	agent, err := startBenchAgent(b, db, agentArgs...)
	if err != nil {
		return nil, err
	}
	r, err := bind.start(cfg, bind.sdk, db, []string{"DBOS_AGENT_SOCKET=" + agent.socket, "DBOS_AGENT_LIBRARY=", "DBOS_AGENT_MODE="})
	if err != nil {
		return nil, err
	}
	r.agentPIDs = []int{agent.cmd.Process.Pid}
	return r, nil
}

// startBindingLibrary is a variant of the binding over libdbos.so in mode,
// on a fresh database (suffix names it); in connect mode, to a
// `dbos-agent serve` of its own.
func startBindingLibrary(bind binding, suffix, mode string) func(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	return func(b *testing.B, cfg transportsConfig) (transportRunner, error) {
		db, err := variantDatabase(b, cfg.baseURL, suffix)
		if err != nil {
			return nil, err
		}
		// The sidecar's child: the binary this benchmark built (from the
		// library's tree, so it speaks the library's plugin handshake),
		// unless DBOS_AGENT_BINARY names another.
		child := agentBinary
		if p := os.Getenv("DBOS_AGENT_BINARY"); p != "" {
			child = p
		}
		env := []string{
			"DBOS_AGENT_LIBRARY=" + cfg.library,
			"DBOS_AGENT_MODE=" + mode,
			"DBOS_SYSTEM_DATABASE_URL=" + db,
			"DBOS_AGENT_BINARY=" + child,
		}
		var agent *agentProc
		if mode == "connect" {
			if agent, err = startBenchAgent(b, db); err != nil {
				return nil, err
			}
			env = append(env, "DBOS_AGENT_SOCKET="+agent.socket)
		} else {
			// A binding that ignored the library would look for the
			// default socket, where some other agent may listen: make
			// it fail instead.
			env = append(env, "DBOS_AGENT_SOCKET="+filepath.Join(os.TempDir(), "bench-no-agent-here.sock"))
		}
		r, err := bind.start(cfg, bind.sdk, db, env)
		if err != nil {
			return nil, err
		}
		if !mapsFile(r.cmd.Process.Pid, cfg.library) {
			r.close()
			return nil, fmt.Errorf("the binding ran without loading %s (no library transport in this %s)", cfg.library, bind.sdk)
		}
		if agent != nil {
			r.agentPIDs = []int{agent.cmd.Process.Pid}
		}
		r.agentChildren = mode == "sidecar"
		return r, nil
	}
}

func startPythonSocketSQLite(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	return bindingOverSocket(b, cfg, pythonBinding, sysdb.SQLiteURL(cfg.sqliteFile))
}

func startDBOSPythonSQLite(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	return startPythonRunner(cfg, "dbos", sysdb.SQLiteURL(cfg.sqliteFile), nil)
}

func startDBOSPython(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	db, err := variantDatabase(b, cfg.baseURL, "dbos_python")
	if err != nil {
		return nil, err
	}
	return startPythonRunner(cfg, "dbos", db, nil)
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// mapsFile reports whether process pid has path mapped (a loaded library).
func mapsFile(pid int, path string) bool {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	return strings.Contains(string(maps), real)
}

// ---- the line-protocol runners

// lineRunner is a runner process that speaks the benchmark's line protocol:
// testdata/bench_runner.py (the Python variants) or
// bindings/node/bench/runner.mjs (the Node variants), which launch once and
// then answer each JSON command line with a "BENCH " line.
type lineRunner struct {
	cmd           *exec.Cmd
	db            string
	stdin         io.WriteCloser
	answers       chan string // its BENCH lines; closed when its output ends
	stderr        *tailBuffer
	agentPIDs     []int
	agentChildren bool // the agent is the runner's child (sidecar)
	sdkVersion    string
	closeOnce     sync.Once
}

// tailBuffer keeps the last bytes a process wrote, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailBufferMax = 16 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBufferMax {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBufferMax:]...)
	}
	return len(p), nil
}

// last is the last line written (a Python traceback's exception).
func (t *tailBuffer) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	return s[strings.LastIndexByte(s, '\n')+1:]
}

func startPythonRunner(cfg transportsConfig, sdk, databaseURL string, env []string) (*lineRunner, error) {
	// SQLAlchemy (DBOS Python) takes postgresql://; pgx takes both.
	pyURL := databaseURL
	if !strings.HasPrefix(databaseURL, "sqlite:") {
		pyURL = "postgresql://" + strings.TrimPrefix(strings.TrimPrefix(databaseURL, "postgres://"), "postgresql://")
	}
	cmd := exec.Command(cfg.python, cfg.runnerScript, "--sdk", sdk, "--database-url", pyURL)
	cmd.Env = append(os.Environ(), env...)
	return startLineRunner(sdk, cmd, databaseURL)
}

// startLineRunner starts cmd, a runner of databaseURL's variant, and waits
// for its first answer, which says it is ready and names its SDK's version.
func startLineRunner(sdk string, cmd *exec.Cmd, databaseURL string) (*lineRunner, error) {
	r := &lineRunner{cmd: cmd, db: databaseURL, answers: make(chan string, 1), stderr: &tailBuffer{}}
	cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// The reader is owned by the process: it ends with its output. Other
	// lines (the SDKs' own) go with its stderr.
	go func() {
		defer close(r.answers)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "BENCH "); ok {
				r.answers <- line
			} else {
				_, _ = r.stderr.Write([]byte(sc.Text() + "\n"))
			}
		}
	}()
	var ready struct{ Version string }
	if err := r.answer(2*time.Minute, &ready); err != nil {
		r.close()
		return nil, fmt.Errorf("%s runner did not start: %w", sdk, err)
	}
	r.sdkVersion = ready.Version
	return r, nil
}

// answer waits for the runner's next answer.
func (r *lineRunner) answer(within time.Duration, into any) error {
	select {
	case line, ok := <-r.answers:
		if !ok {
			_ = r.cmd.Wait()
			return fmt.Errorf("runner exited (%v): %s", r.cmd.ProcessState, r.stderr.last())
		}
		return json.Unmarshal([]byte(line), into)
	case <-time.After(within):
		return fmt.Errorf("no answer within %s: %s", within, r.stderr.last())
	}
}

func (r *lineRunner) run(concurrency int, d time.Duration, latencies bool) (runResult, error) {
	cmd, err := json.Marshal(map[string]any{"concurrency": concurrency, "seconds": d.Seconds(), "latencies": latencies})
	if err != nil {
		return runResult{}, err
	}
	if _, err := r.stdin.Write(append(cmd, '\n')); err != nil {
		return runResult{}, fmt.Errorf("runner gone: %w: %s", err, r.stderr.last())
	}
	var a struct {
		ElapsedS  float64   `json:"elapsed_s"`
		Workflows int       `json:"workflows"`
		StepUS    []float64 `json:"step_us"`
	}
	if err := r.answer(d+5*time.Minute, &a); err != nil {
		return runResult{}, err
	}
	res := runResult{elapsed: time.Duration(a.ElapsedS * float64(time.Second)), workflows: a.Workflows}
	for _, us := range a.StepUS {
		res.steps = append(res.steps, time.Duration(us*float64(time.Microsecond)))
	}
	return res, nil
}

func (r *lineRunner) processes() (client, agent []int) {
	pid := r.cmd.Process.Pid
	if r.agentChildren {
		return []int{pid}, childPIDs(pid)
	}
	return []int{pid}, r.agentPIDs
}

func (r *lineRunner) database() string { return r.db }
func (r *lineRunner) version() string  { return r.sdkVersion }

func (r *lineRunner) close() {
	r.closeOnce.Do(func() {
		_, _ = r.stdin.Write([]byte(`{"quit": true}` + "\n"))
		_ = r.stdin.Close()
		done := make(chan struct{})
		go func() {
			for range r.answers {
			}
			_ = r.cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = r.cmd.Process.Kill()
			<-done
		}
	})
}

// ---- DBOS Go, in this process

type goSDKRunner struct {
	ctx       dbos.Context
	db        string
	wf        dbos.Workflow[string, string]
	recording atomic.Bool
	mu        sync.Mutex
	steps     []time.Duration
}

func startDBOSGo(b *testing.B, cfg transportsConfig) (transportRunner, error) {
	db, err := variantDatabase(b, cfg.baseURL, "dbos_go")
	if err != nil {
		return nil, err
	}
	r := &goSDKRunner{db: db}
	names := make([]string, stepsPerWorkflow)
	for i := range names {
		names[i] = "s" + strconv.Itoa(i)
	}
	step := func(context.Context) (string, error) { return "x", nil }
	r.wf = func(ctx dbos.Context, _ string) (string, error) {
		rec := r.recording.Load()
		var took [stepsPerWorkflow]time.Duration
		for i := range stepsPerWorkflow {
			start := time.Now()
			if _, err := dbos.RunAsStep(ctx, step, dbos.WithStepName(names[i])); err != nil {
				return "", err
			}
			took[i] = time.Since(start)
		}
		if rec {
			r.mu.Lock()
			r.steps = append(r.steps, took[:]...)
			r.mu.Unlock()
		}
		return "x", nil
	}
	ctx, err := dbos.NewContext(context.Background(), dbos.Config{
		AppName: "bench", DatabaseURL: db, ExecutorID: "go-sdk", Logger: sdkLogger(),
	})
	if err != nil {
		return nil, err
	}
	r.ctx = ctx
	dbos.RegisterWorkflow(ctx, r.wf, dbos.WithWorkflowName("ten_steps"))
	if err := dbos.Launch(ctx); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *goSDKRunner) run(concurrency int, d time.Duration, latencies bool) (runResult, error) {
	r.mu.Lock()
	r.steps = nil
	r.mu.Unlock()
	r.recording.Store(latencies)
	defer r.recording.Store(false)
	res, err := r.runFor(concurrency, d)
	if err != nil {
		return runResult{}, err
	}
	r.mu.Lock()
	res.steps, r.steps = r.steps, nil
	r.mu.Unlock()
	return res, nil
}

// runFor is concurrency goroutines each running workflows one after another
// (RunWorkflow, then GetResult) until d has passed.
func (r *goSDKRunner) runFor(concurrency int, d time.Duration) (runResult, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	start := time.Now()
	deadline := start.Add(d)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				h, err := dbos.RunWorkflow(r.ctx, r.wf, "")
				if err == nil {
					var out string
					if out, err = h.GetResult(); err == nil && out != "x" {
						err = fmt.Errorf("workflow returned %q", out)
					}
				}
				if err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return runResult{}, err
	}
	return runResult{elapsed: elapsed, workflows: int(done.Load())}, nil
}

func (r *goSDKRunner) processes() (client, agent []int) { return []int{os.Getpid()}, nil }
func (r *goSDKRunner) database() string                 { return r.db }
func (r *goSDKRunner) close()                           { _ = dbos.Shutdown(r.ctx, 30*time.Second) }

// version is the SDK's version from go.mod (a test binary's build info
// lists no dependencies).
func (r *goSDKRunner) version() string {
	const module = "github.com/dbos-inc/dbos-transact-golang"
	mod, _ := os.ReadFile("../go.mod")
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return module + " " + f[1]
		}
	}
	return module
}
