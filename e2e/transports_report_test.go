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
// one that is gone.
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted after its closing parenthesis, where field 3 (state) is
	// the first; utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * clockTick
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
	var xs []float64
	for _, m := range v {
		for _, r := range ref {
			if r.round == m.round && of(r) > 0 && of(m) > 0 {
				xs = append(xs, of(m)/of(r))
			}
		}
	}
	return spreadOf(xs)
}

func stepsPerSec(m transportMeasurement) float64 { return m.stepsPerSec }
func p50Ms(m transportMeasurement) float64       { return float64(m.p50) / float64(time.Millisecond) }
func p99Ms(m transportMeasurement) float64       { return float64(m.p99) / float64(time.Millisecond) }

// invert is for latencies, so that above 1 is better throughout.
func invert(of func(transportMeasurement) float64) func(transportMeasurement) float64 {
	return func(m transportMeasurement) float64 {
		if x := of(m); x > 0 {
			return 1 / x
		}
		return 0
	}
}

func printTransportsReport(w io.Writer, cfg transportsConfig, variants []*transportVariant) {
	byName := map[string]*transportVariant{}
	for _, v := range variants {
		byName[v.name] = v
	}
	hasLatency := slices.Contains(cfg.concurrency, 1)

	fmt.Fprintf(w, "\nBenchmarkTransports: steps/s (median of %d round(s) [range]); step latency at c=1 in ms\n", cfg.rounds)
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

	for _, ref := range []string{variantDBOSPython, variantDBOSGo, variantDBOSPythonSQLite, "python/socket"} {
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
				row += "\t" + ratioCell(v.results[c], rv.results[c], stepsPerSec)
			}
			if hasLatency {
				row += "\t" + ratioCell(v.results[1], rv.results[1], invert(p50Ms))
				row += "\t" + ratioCell(v.results[1], rv.results[1], invert(p99Ms))
			}
			fmt.Fprintln(tw, row)
		}
		_ = tw.Flush()
	}

	fmt.Fprintf(w, "\nCPU per step in µs (medians): the client process, the agent process, the Postgres backends of the variant's database\n"+
		"(none for a SQLite variant: SQLite runs inside the process that opens the file);\n"+
		"host: the whole machine's busy share of its %d cores during the measurement, other: of which not these processes (other work on the machine, Postgres's own background processes)\n",
		hostCores())
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tc\tclient\tagent\tpostgres\thost busy %\tother %")
	for _, v := range variants {
		if v.missing != "" {
			continue
		}
		for _, c := range cfg.concurrency {
			ms := v.results[c]
			if len(ms) == 0 {
				continue
			}
			us := func(of func(transportMeasurement) time.Duration) string {
				return figures(ms, func(m transportMeasurement) float64 { return float64(of(m)) / float64(time.Microsecond) }).format(0, "")
			}
			// No backend found by its title (update_process_title off?):
			// unknown, not 0.
			pg := "n/a"
			if slices.ContainsFunc(ms, func(m transportMeasurement) bool { return m.backends > 0 }) {
				pg = us(func(m transportMeasurement) time.Duration { return m.postgresCPU })
			}
			agent := v.noAgent
			if agent == "" {
				agent = us(func(m transportMeasurement) time.Duration { return m.agentCPU })
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", v.name, c,
				us(func(m transportMeasurement) time.Duration { return m.clientCPU }),
				agent,
				pg,
				figures(ms, func(m transportMeasurement) float64 { return m.hostBusyPct }).format(0, ""),
				figures(ms, func(m transportMeasurement) float64 { return m.otherBusyPct }).format(0, ""))
		}
	}
	_ = tw.Flush()

	for _, v := range variants {
		switch {
		case v.missing != "":
			fmt.Fprintf(w, "%s: not measured: %s\n", v.name, v.missing)
		case v.failed != "":
			fmt.Fprintf(w, "%s: stopped after a failure (its figures are of the rounds before): %s\n", v.name, v.failed)
		}
	}
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

func ratioCell(v, ref []transportMeasurement, of func(transportMeasurement) float64) string {
	s := roundRatios(v, ref, of)
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
		ClientCPUUs  float64 `json:"client_cpu_us_per_step"`
		AgentCPUUs   float64 `json:"agent_cpu_us_per_step"`
		PgCPUUs      float64 `json:"postgres_cpu_us_per_step"`
		PgBackends   int     `json:"postgres_backends"`
		HostBusyPct  float64 `json:"host_busy_pct"`
		OtherBusyPct float64 `json:"other_busy_pct"`
	}
	type variant struct {
		Name         string        `json:"name"`
		Missing      string        `json:"missing,omitempty"`
		Failed       string        `json:"failed,omitempty"`
		Measurements []measurement `json:"measurements"`
	}
	out := struct {
		Rounds      int       `json:"rounds"`
		DurationS   float64   `json:"duration_s"`
		Concurrency []int     `json:"concurrency"`
		Variants    []variant `json:"variants"`
	}{cfg.rounds, cfg.duration.Seconds(), cfg.concurrency, nil}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, v := range variants {
		jv := variant{Name: v.name, Missing: v.missing, Failed: v.failed, Measurements: []measurement{}}
		for _, c := range cfg.concurrency {
			for _, m := range v.results[c] {
				jv.Measurements = append(jv.Measurements, measurement{
					Round: m.round, Concurrency: c, StepsPerSec: m.stepsPerSec, P50Ms: p50Ms(m), P99Ms: p99Ms(m),
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
