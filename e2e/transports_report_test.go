package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ---- CPU accounting from /proc

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on every Linux
// this runs on; reading it needs sysconf, which needs cgo).
const clockTick = 10 * time.Millisecond

// cpuUsed is what one measurement cost.
type cpuUsed struct {
	client, agent, postgres time.Duration
	backends                int           // how many backends postgres sums
	hostBusy, hostCapacity  time.Duration // all cores, everything on the machine
}

// cpuSnapshot follows one measurement's CPU: the client's and the agent's
// processes, the Postgres backends serving the variant's database (found by
// their process titles, "postgres: [cluster:] user database ..."; those of
// other databases and the server's own background processes are not
// counted), and the host's. Backends are sampled every
// backendSampleInterval, so that one which exits during the measurement (a
// pool closing a connection) counts with what it had used when last seen.
type cpuSnapshot struct {
	database      string
	client, agent []int
	clientCPU     time.Duration
	agentCPU      time.Duration
	busy, total   int64
	start         map[int]time.Duration // backends at the start
	stop, done    chan struct{}
	last          map[int]time.Duration // backends when last seen; the sampler's until done
}

const backendSampleInterval = 250 * time.Millisecond

func newCPUSnapshot(databaseURL string, client, agent []int) (*cpuSnapshot, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return nil, err
	}
	s := &cpuSnapshot{
		database: strings.TrimPrefix(u.Path, "/"), client: client, agent: agent,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	s.start = backendCPU(s.database)
	s.last = maps.Clone(s.start)
	s.clientCPU, s.agentCPU = processesCPU(client), processesCPU(agent)
	if s.busy, s.total, err = hostTicks(); err != nil {
		return nil, err
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(backendSampleInterval)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				maps.Copy(s.last, backendCPU(s.database))
				return
			case <-tick.C:
				maps.Copy(s.last, backendCPU(s.database))
			}
		}
	}()
	return s, nil
}

// since stops the sampler and returns what the measurement used.
func (s *cpuSnapshot) since() (cpuUsed, error) {
	close(s.stop)
	<-s.done
	busy, total, err := hostTicks()
	if err != nil {
		return cpuUsed{}, err
	}
	u := cpuUsed{
		client:       processesCPU(s.client) - s.clientCPU,
		agent:        processesCPU(s.agent) - s.agentCPU,
		hostBusy:     time.Duration(busy-s.busy) * clockTick,
		hostCapacity: time.Duration(total-s.total) * clockTick,
	}
	for pid, cpu := range s.last {
		u.postgres += cpu - s.start[pid] // a backend that started meanwhile counts whole
	}
	u.backends = len(s.last)
	return u, nil
}

// backendCPU is the CPU time of each Postgres backend serving database.
func backendCPU(database string) map[int]time.Duration {
	out := map[int]time.Duration{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || !bytes.HasPrefix(cmdline, []byte("postgres: ")) {
			continue
		}
		f := strings.Fields(string(cmdline))
		i := 1
		if len(f) > i && strings.HasSuffix(f[i], ":") { // cluster_name
			i++
		}
		if len(f) > i+1 && f[i+1] == database {
			out[pid] = processCPU(pid)
		}
	}
	return out
}

// processCPU is a process's user and system time (all its threads), 0 for
// one that is gone: fields 14 and 15, utime and stime.
func processCPU(pid int) time.Duration { return statTimes(pid, 14) }

// reapedChildrenCPU is the user and system time of the children a process
// waited for: fields 16 and 17, cutime and cstime.
func reapedChildrenCPU(pid int) time.Duration { return statTimes(pid, 16) }

// statTimes is the sum of a process's /proc stat fields field and field+1
// (counted from 1, as proc(5) does), in clock ticks; 0 for one that is gone.
func statTimes(pid, field int) time.Duration {
	f := statFields(pid)
	i := field - 3 // statFields start at field 3
	if len(f) < i+2 {
		return 0
	}
	a, _ := strconv.ParseInt(f[i], 10, 64)
	b, _ := strconv.ParseInt(f[i+1], 10, 64)
	return time.Duration(a+b) * clockTick
}

// statFields are a process's /proc stat fields after its command name,
// from field 3 (state) on; nil for one that is gone.
func statFields(pid int) []string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted after its closing parenthesis.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

func processesCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		sum += processCPU(pid)
	}
	return sum
}

// childPIDs are a process's children (the sidecar agent a library started).
func childPIDs(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// hostTicks are the machine's busy and total CPU ticks, all cores
// (/proc/stat's first line; idle and iowait are not busy).
func hostTicks() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, s := range f[1:] {
		if i >= 8 { // guest times are already in user and nice
			break
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

// ---- the report

// spread is the median of a round's figures and their range.
type spread struct{ median, lo, hi float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{m, s[0], s[len(s)-1]}
}

// format prints the median followed by unit and, with more than one
// round, the range.
func (s spread) format(prec int, unit string) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	if s.lo == s.hi {
		return f(s.median) + unit
	}
	return f(s.median) + unit + " [" + f(s.lo) + "–" + f(s.hi) + "]"
}

func figures(ms []transportMeasurement, of func(transportMeasurement) float64) spread {
	xs := make([]float64, len(ms))
	for i, m := range ms {
		xs[i] = of(m)
	}
	return spreadOf(xs)
}

// roundRatios are of(v)/of(ref) for each round both measured (so that each
// ratio compares figures taken minutes apart at most).
func roundRatios(v, ref []transportMeasurement, of func(transportMeasurement) float64) spread {
	return roundRatiosOf(v, ref, of, of)
}

// roundRatiosOf are ofV(v)/ofRef(ref) for each round both measured.
func roundRatiosOf(v, ref []transportMeasurement, ofV, ofRef func(transportMeasurement) float64) spread {
	var xs []float64
	for _, m := range v {
		for _, r := range ref {
			if r.round == m.round && ofRef(r) > 0 && ofV(m) > 0 {
				xs = append(xs, ofV(m)/ofRef(r))
			}
		}
	}
	return spreadOf(xs)
}

func stepsPerSec(m transportMeasurement) float64 { return m.stepsPerSec }
func p50Ms(m transportMeasurement) float64       { return float64(m.p50) / float64(time.Millisecond) }
func p99Ms(m transportMeasurement) float64       { return float64(m.p99) / float64(time.Millisecond) }
func commitMs(m transportMeasurement) float64 {
	return float64(m.commitLatency) / float64(time.Millisecond)
}

// usOf is a per-step CPU figure in µs.
func usOf(of func(transportMeasurement) time.Duration) func(transportMeasurement) float64 {
	return func(m transportMeasurement) float64 { return float64(of(m)) / float64(time.Microsecond) }
}

func clientCPU(m transportMeasurement) time.Duration   { return m.clientCPU }
func agentCPU(m transportMeasurement) time.Duration    { return m.agentCPU }
func postgresCPU(m transportMeasurement) time.Duration { return m.postgresCPU }
func hostBusyPct(m transportMeasurement) float64       { return m.hostBusyPct }
func otherBusyPct(m transportMeasurement) float64      { return m.otherBusyPct }

// invert is for latencies, so that above 1 is better throughout.
func invert(of func(transportMeasurement) float64) func(transportMeasurement) float64 {
	return func(m transportMeasurement) float64 {
		if x := of(m); x > 0 {
			return 1 / x
		}
		return 0
	}
}

func printTransportsReport(w io.Writer, cfg transportsConfig, all []*transportVariant) {
	// The workload's variants; the ceiling is reported on its own.
	var variants []*transportVariant
	var ceiling *transportVariant
	byName := map[string]*transportVariant{}
	for _, v := range all {
		if v.ceiling {
			ceiling = v
			continue
		}
		variants = append(variants, v)
		byName[v.name] = v
	}
	hasLatency := slices.Contains(cfg.concurrency, 1)

	fmt.Fprintf(w, "\n%s: steps/s (median of %d round(s) [range]); step latency at c=1 in ms\n", cfg.name, cfg.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, figuresHeader(cfg, hasLatency, " ms"))
	for _, v := range variants {
		row := v.name
		if v.missing != "" {
			// Every cell, so the columns of the rows after it still line up.
			fmt.Fprintln(tw, row+strings.Repeat("\t-", len(cfg.concurrency)+2*btoi(hasLatency))+"\t(not measured: below)")
			continue
		}
		for _, c := range cfg.concurrency {
			row += "\t" + orDash(v.results[c], func(ms []transportMeasurement) string { return figures(ms, stepsPerSec).format(0, "") })
		}
		if hasLatency {
			row += "\t" + orDash(v.results[1], func(ms []transportMeasurement) string { return figures(ms, p50Ms).format(2, "") })
			row += "\t" + orDash(v.results[1], func(ms []transportMeasurement) string { return figures(ms, p99Ms).format(2, "") })
		}
		fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()

	for _, ref := range cfg.references {
		rv := byName[ref]
		if rv == nil || rv.missing != "" {
			continue
		}
		fmt.Fprintf(w, "\nratio to %s (per-round ratios: median [range]; above 1 is better: steps/s variant/%s, latency %s/variant)\n", ref, ref, ref)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, figuresHeader(cfg, hasLatency, ""))
		for _, v := range variants {
			if v.missing != "" || v.name == ref {
				continue
			}
			row := v.name
			for _, c := range cfg.concurrency {
				row += "\t" + ratioCell(roundRatios(v.results[c], rv.results[c], stepsPerSec))
			}
			if hasLatency {
				row += "\t" + ratioCell(roundRatios(v.results[1], rv.results[1], invert(p50Ms)))
				row += "\t" + ratioCell(roundRatios(v.results[1], rv.results[1], invert(p99Ms)))
			}
			fmt.Fprintln(tw, row)
		}
		_ = tw.Flush()
	}

	measured := func(v *transportVariant, c int) bool { return v != nil && v.missing == "" && len(v.results[c]) > 0 }
	besideCeiling := ceiling != nil && slices.ContainsFunc(cfg.concurrency, func(c int) bool { return measured(ceiling, c) })
	fmt.Fprintf(w, "\nCPU per step in µs (medians): the client process, the agent process, the Postgres backends of the variant's database\n"+
		"(none for a SQLite variant: SQLite runs inside the process that opens the file);\n"+
		"host: the whole machine's busy share of its %d cores during the measurement, other: of which not these processes (other work on the machine, Postgres's own background processes)\n",
		hostCores())
	header := "variant\tc\tclient\tagent\tpostgres\thost busy %\tother %"
	if besideCeiling {
		fmt.Fprintln(w, "pgbench postgres/commit: the ceiling's Postgres CPU per one-row INSERT commit at the same c (below), beside the variant's per step")
		header += "\tpgbench postgres/commit"
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, v := range variants {
		for _, c := range cfg.concurrency {
			if !measured(v, c) {
				continue
			}
			ms := v.results[c]
			// No backend found by its title (update_process_title off?):
			// unknown, not 0.
			pg := "n/a"
			if slices.ContainsFunc(ms, func(m transportMeasurement) bool { return m.backends > 0 }) {
				pg = figures(ms, usOf(postgresCPU)).format(0, "")
			}
			agent := v.noAgent
			if agent == "" {
				agent = figures(ms, usOf(agentCPU)).format(0, "")
			}
			row := fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s\t%s", v.name, c,
				figures(ms, usOf(clientCPU)).format(0, ""), agent, pg,
				figures(ms, hostBusyPct).format(0, ""), figures(ms, otherBusyPct).format(0, ""))
			if besideCeiling {
				row += "\t" + orDash(ceiling.results[c], func(ms []transportMeasurement) string { return figures(ms, usOf(postgresCPU)).format(0, "") })
			}
			fmt.Fprintln(tw, row)
		}
	}
	_ = tw.Flush()

	switch {
	case besideCeiling:
		printCeiling(w, cfg, ceiling, variants, hasLatency)
	case ceiling != nil:
		fmt.Fprintf(w, "\n%s, the ceiling: no figures (below)\n", ceiling.name)
	}

	for _, v := range all {
		switch {
		case v.missing != "":
			fmt.Fprintf(w, "%s: not measured: %s\n", v.name, v.missing)
		case v.failed != "":
			fmt.Fprintf(w, "%s: stopped after a failure (its figures are of the rounds before): %s\n", v.name, v.failed)
		}
	}
}

// printCeiling reports pgbench's commits and the variants against them:
// steps/s as a share of commits/s, and the step latency at c=1 against one
// commit's.
func printCeiling(w io.Writer, cfg transportsConfig, ceiling *transportVariant, variants []*transportVariant, hasLatency bool) {
	fmt.Fprintf(w, "\n%s, the ceiling: one one-row INSERT per transaction (pgbench -n -M prepared -c C -j min(C,2) -T %d; medians of %d round(s) [range]);\n"+
		"postgres: the CPU of its connections' backends per commit (what the postmaster reaped of them), pgbench: the pgbench process's\n",
		ceiling.name, pgbenchSeconds(cfg.duration), cfg.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "c\tcommits/s\tlatency avg ms\tpostgres µs/commit\tpgbench µs/commit\thost busy %\tother %")
	for _, c := range cfg.concurrency {
		ms := ceiling.results[c]
		if len(ms) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c,
			figures(ms, stepsPerSec).format(0, ""), figures(ms, commitMs).format(3, ""),
			figures(ms, usOf(postgresCPU)).format(0, ""), figures(ms, usOf(clientCPU)).format(0, ""),
			figures(ms, hostBusyPct).format(0, ""), figures(ms, otherBusyPct).format(0, ""))
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nsteps/s as a share of %s's commits/s at the same c (per-round ratios: median [range])\n", ceiling.name)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "variant"
	for _, c := range cfg.concurrency {
		header += fmt.Sprintf("\tc=%d", c)
	}
	fmt.Fprintln(tw, header)
	for _, v := range variants {
		if v.missing != "" {
			continue
		}
		row := v.name
		for _, c := range cfg.concurrency {
			row += "\t" + ratioCell(roundRatios(v.results[c], ceiling.results[c], stepsPerSec))
		}
		fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()

	if !hasLatency || len(ceiling.results[1]) == 0 {
		return
	}
	fmt.Fprintf(w, "\nc=1 step latency against one commit (%s's latency average at c=1, %s ms): step p50 / commit, step p99 / commit (per-round ratios: median [range])\n",
		ceiling.name, figures(ceiling.results[1], commitMs).format(3, ""))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tstep p50 ms\tstep p99 ms\tp50 / commit\tp99 / commit")
	for _, v := range variants {
		if v.missing != "" || len(v.results[1]) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.name,
			figures(v.results[1], p50Ms).format(2, ""), figures(v.results[1], p99Ms).format(2, ""),
			ratioCell(roundRatiosOf(v.results[1], ceiling.results[1], p50Ms, commitMs)),
			ratioCell(roundRatiosOf(v.results[1], ceiling.results[1], p99Ms, commitMs)))
	}
	_ = tw.Flush()
}

// figuresHeader names the columns of a table of steps/s at each
// concurrency and the c=1 latencies (in unit).
func figuresHeader(cfg transportsConfig, hasLatency bool, unit string) string {
	header := "variant"
	for _, c := range cfg.concurrency {
		header += fmt.Sprintf("\tc=%d steps/s", c)
	}
	if hasLatency {
		header += "\tc=1 step p50" + unit + "\tc=1 step p99" + unit
	}
	return header
}

func orDash(ms []transportMeasurement, f func([]transportMeasurement) string) string {
	if len(ms) == 0 {
		return "-"
	}
	return f(ms)
}

func ratioCell(s spread) string {
	if s.median == 0 {
		return "-"
	}
	return s.format(2, "x")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func hostCores() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n
}

// writeTransportsJSON writes every measurement, for tools that compare runs.
func writeTransportsJSON(path string, cfg transportsConfig, variants []*transportVariant) error {
	type measurement struct {
		Round        int     `json:"round"`
		Concurrency  int     `json:"concurrency"`
		StepsPerSec  float64 `json:"steps_per_sec"`
		P50Ms        float64 `json:"step_p50_ms,omitempty"`
		P99Ms        float64 `json:"step_p99_ms,omitempty"`
		CommitMs     float64 `json:"latency_avg_ms,omitempty"` // the ceiling's: pgbench's
		ClientCPUUs  float64 `json:"client_cpu_us_per_step"`
		AgentCPUUs   float64 `json:"agent_cpu_us_per_step"`
		PgCPUUs      float64 `json:"postgres_cpu_us_per_step"`
		PgBackends   int     `json:"postgres_backends"`
		HostBusyPct  float64 `json:"host_busy_pct"`
		OtherBusyPct float64 `json:"other_busy_pct"`
	}
	type figure struct {
		Median float64 `json:"median"`
		Min    float64 `json:"min"`
		Max    float64 `json:"max"`
	}
	fig := func(s spread) *figure {
		if s.median == 0 {
			return nil
		}
		return &figure{s.median, s.lo, s.hi}
	}
	type summary struct {
		StepsPerSec  *figure            `json:"steps_per_sec,omitempty"`
		P50Ms        *figure            `json:"step_p50_ms,omitempty"`
		P99Ms        *figure            `json:"step_p99_ms,omitempty"`
		CommitMs     *figure            `json:"latency_avg_ms,omitempty"`
		ClientCPUUs  *figure            `json:"client_cpu_us_per_step,omitempty"`
		AgentCPUUs   *figure            `json:"agent_cpu_us_per_step,omitempty"`
		PgCPUUs      *figure            `json:"postgres_cpu_us_per_step,omitempty"`
		RatioTo      map[string]*figure `json:"steps_per_sec_ratio_to,omitempty"`
		CeilingShare *figure            `json:"share_of_ceiling,omitempty"`
		P50ToCommit  *figure            `json:"step_p50_to_commit_latency,omitempty"`
	}
	var ceiling *transportVariant
	byName := map[string]*transportVariant{}
	for _, v := range variants {
		byName[v.name] = v
		if v.ceiling {
			ceiling = v
		}
	}
	type variant struct {
		Name string `json:"name"`
		// Kind is "workload" (a step is one of a 10-step workflow's) or
		// "ceiling" (pgbench: a step is one committed one-row INSERT).
		Kind         string        `json:"kind"`
		Version      string        `json:"version,omitempty"`
		Missing      string        `json:"missing,omitempty"`
		Failed       string        `json:"failed,omitempty"`
		Measurements []measurement `json:"measurements"`
		// Summary is what the report prints, per concurrency ("1", "16",
		// ...): medians and ranges of the rounds, per-round ratios.
		Summary map[string]summary `json:"summary,omitempty"`
	}
	out := struct {
		Benchmark   string    `json:"benchmark"`
		Rounds      int       `json:"rounds"`
		DurationS   float64   `json:"duration_s"`
		WarmupS     float64   `json:"warmup_s"`
		Concurrency []int     `json:"concurrency"`
		HostCores   int       `json:"host_cores"`
		Variants    []variant `json:"variants"`
	}{cfg.name, cfg.rounds, cfg.duration.Seconds(), cfg.warmup.Seconds(), cfg.concurrency, hostCores(), nil}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, v := range variants {
		jv := variant{Name: v.name, Kind: "workload", Version: v.version, Missing: v.missing, Failed: v.failed, Measurements: []measurement{}}
		if v.ceiling {
			jv.Kind = "ceiling"
		}
		for _, c := range cfg.concurrency {
			ms := v.results[c]
			if len(ms) > 0 {
				sum := summary{
					StepsPerSec: fig(figures(ms, stepsPerSec)), P50Ms: fig(figures(ms, p50Ms)), P99Ms: fig(figures(ms, p99Ms)),
					CommitMs: fig(figures(ms, commitMs)), ClientCPUUs: fig(figures(ms, usOf(clientCPU))),
					AgentCPUUs: fig(figures(ms, usOf(agentCPU))), PgCPUUs: fig(figures(ms, usOf(postgresCPU))),
					RatioTo: map[string]*figure{},
				}
				for _, ref := range cfg.references {
					if rv := byName[ref]; rv != nil && rv != v && !v.ceiling {
						if f := fig(roundRatios(ms, rv.results[c], stepsPerSec)); f != nil {
							sum.RatioTo[ref] = f
						}
					}
				}
				if ceiling != nil && !v.ceiling {
					sum.CeilingShare = fig(roundRatios(ms, ceiling.results[c], stepsPerSec))
					sum.P50ToCommit = fig(roundRatiosOf(ms, ceiling.results[c], p50Ms, commitMs))
				}
				if jv.Summary == nil {
					jv.Summary = map[string]summary{}
				}
				jv.Summary[strconv.Itoa(c)] = sum
			}
			for _, m := range ms {
				jv.Measurements = append(jv.Measurements, measurement{
					Round: m.round, Concurrency: c, StepsPerSec: m.stepsPerSec, P50Ms: p50Ms(m), P99Ms: p99Ms(m), CommitMs: commitMs(m),
					ClientCPUUs: us(m.clientCPU), AgentCPUUs: us(m.agentCPU), PgCPUUs: us(m.postgresCPU), PgBackends: m.backends,
					HostBusyPct: m.hostBusyPct, OtherBusyPct: m.otherBusyPct,
				})
			}
		}
		out.Variants = append(out.Variants, jv)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
