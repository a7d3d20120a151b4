// Command ratios runs the comparison benchmarks and prints the sluice/anchor
// ratio table that docs/benchmarks.md quotes, so that anyone can check the
// claims on their own CPU with one command (make bench).
//
// It builds each package's test binary once and runs the binaries -count
// times in turn, so that every round has sluice and its anchor measured
// minutes apart at most, on the same load: a ratio is taken within a round
// and the table gives the median of the rounds' ratios. The raw output
// (benchstat's format) is written to -out.
//
//	go run ./cmd/ratios -count 6 -cpu 2,4,8
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// row is one line of the table: sluice's benchmark against the anchor's,
// both named without the Benchmark prefix and the -cpu suffix.
type row struct {
	title, sluice, anchor string
	bar                   float64 // the ratio to stay at or below; 0: none
}

var rows = []row{
	{"token bucket Allow, serial, admit", "Allow/case=admit/lib=sluice", "Allow/case=admit/lib=xrate", 0.5},
	{"token bucket Allow, serial, deny", "Allow/case=deny/lib=sluice", "Allow/case=deny/lib=xrate", 0.5},
	{"token bucket Allow, RunParallel, admit", "AllowParallel/case=admit/lib=sluice", "AllowParallel/case=admit/lib=xrate", 0.5},
	{"token bucket Allow, RunParallel, deny", "AllowParallel/case=deny/lib=sluice", "AllowParallel/case=deny/lib=xrate", 0.5},
	{"concurrency acquire + release, serial", "ConcurrencyUncontended/lib=sluice/mode=serial", "ConcurrencyUncontended/lib=semaphore/mode=serial", 1},
	{"concurrency acquire + release, RunParallel", "ConcurrencyUncontended/lib=sluice/mode=parallel", "ConcurrencyUncontended/lib=semaphore/mode=parallel", 1},
	{"concurrency rejection, RunParallel (vs failing TryAcquire)", "ConcurrencyRejected/lib=sluice/mode=parallel", "ConcurrencyRejected/lib=semaphore/mode=parallel", 1},
	{"keyed.Buckets, 100,000 keys, serial (vs go-limiter)", "KeyedAllow/lib=sluice-buckets/keys=100000/mode=serial", "KeyedAllow/lib=sethvargo/keys=100000/mode=serial", 0.8},
	{"keyed.Buckets, 100,000 keys, RunParallel (vs go-limiter)", "KeyedAllow/lib=sluice-buckets/keys=100000/mode=parallel", "KeyedAllow/lib=sethvargo/keys=100000/mode=parallel", 0.8},
}

// The middleware's handlers, measured against the bare one.
var middleware = []string{"global_concurrency", "per_ip_bucket", "per_ip_bucket+global+policy", "per_ip_bucket+trusted_proxy"}

func main() {
	count := flag.Int("count", 6, "rounds: each test binary runs this many times, in turn")
	cpu := flag.String("cpu", "2,4,8", "GOMAXPROCS values, as go test -cpu")
	benchtime := flag.String("benchtime", "300ms", "as go test -benchtime")
	out := flag.String("out", "bench.txt", "file for the raw benchmark output (benchstat's input)")
	flag.Parse()
	if *count < 1 {
		fmt.Fprintln(os.Stderr, "ratios: -count must be at least 1")
		os.Exit(2)
	}
	// Packages and the benchmarks run from each; paths are relative to bench/.
	pkgs := []struct{ pkg, bench string }{
		{".", "^(BenchmarkAllow|BenchmarkAllowParallel|BenchmarkConcurrencyUncontended|BenchmarkConcurrencyRejected|BenchmarkKeyedAllow)$"},
		{"github.com/sluicehq/sluice/httplimit", "^BenchmarkMiddleware$"},
	}
	dir, err := os.MkdirTemp("", "sluice-ratios")
	check(err)
	defer os.RemoveAll(dir)
	bins := make([]string, len(pkgs))
	for i, p := range pkgs {
		bins[i] = filepath.Join(dir, fmt.Sprintf("p%d.test", i))
		run("go", "test", "-c", "-o", bins[i], p.pkg)
	}
	f, err := os.Create(*out)
	check(err)
	defer f.Close()
	var rounds []map[string]result
	for r := range *count {
		var buf bytes.Buffer
		for i, p := range pkgs {
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", r+1, *count, p.pkg)
			cmd := exec.Command(bins[i], "-test.run", "^$", "-test.bench", p.bench, "-test.benchmem",
				"-test.count", "1", "-test.cpu", *cpu, "-test.benchtime", *benchtime)
			cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, f), os.Stderr
			check(cmd.Run())
		}
		rounds = append(rounds, parse(&buf))
	}
	cpuModel := model(rounds)
	fmt.Printf("CPU: %s, %d cores, %s %s/%s; %d rounds, -cpu %s, -benchtime %s; medians of the rounds' ratios.\n\n",
		cpuModel, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, *count, *cpu, *benchtime)
	printRatios(rounds, strings.Split(*cpu, ","))
	fmt.Println()
	printMiddleware(rounds, strings.Split(*cpu, ","))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(1)
	}
}

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	check(cmd.Run())
}

// result is one benchmark line's figures.
type result struct {
	ns, allocs, bytes float64
}

// parse reads go test -bench output into results keyed by name and -cpu
// suffix ("Allow/case=admit/lib=sluice-2"), and the cpu: line under "cpu".
func parse(r io.Reader) map[string]result {
	m := map[string]result{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "cpu: "); ok {
			m["cpu: "+rest] = result{}
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 4 || !strings.HasPrefix(fs[0], "Benchmark") {
			continue
		}
		var res result
		for i := 2; i+1 < len(fs); i += 2 {
			var v float64
			if _, err := fmt.Sscan(fs[i], &v); err != nil {
				continue
			}
			switch fs[i+1] {
			case "ns/op":
				res.ns = v
			case "allocs/op":
				res.allocs = v
			case "B/op":
				res.bytes = v
			}
		}
		m[strings.TrimPrefix(fs[0], "Benchmark")] = res
	}
	return m
}

func model(rounds []map[string]result) string {
	for k := range rounds[0] {
		if rest, ok := strings.CutPrefix(k, "cpu: "); ok {
			return rest
		}
	}
	return "unknown"
}

// key is a benchmark's name as go test prints it for GOMAXPROCS cpu (no
// suffix for 1).
func key(name, cpu string) string {
	if cpu == "1" {
		return name
	}
	return name + "-" + cpu
}

func printRatios(rounds []map[string]result, cpus []string) {
	fmt.Println("| benchmark | -cpu | sluice ns/op | anchor ns/op | ratio | bar | allocs/op (sluice / anchor) | |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		for _, c := range cpus {
			var ratios, sl, an []float64
			var sa, aa float64
			for _, m := range rounds {
				s, ok1 := m[key(r.sluice, c)]
				a, ok2 := m[key(r.anchor, c)]
				if !ok1 || !ok2 || a.ns == 0 {
					continue
				}
				ratios, sl, an = append(ratios, s.ns/a.ns), append(sl, s.ns), append(an, a.ns)
				sa, aa = max(sa, s.allocs), max(aa, a.allocs)
			}
			if len(ratios) == 0 {
				continue
			}
			ratio := median(ratios)
			verdict := "meets the bar"
			if ratio > r.bar || sa > 0 {
				verdict = "**misses the bar**"
			}
			fmt.Printf("| %s | %s | %.1f | %.1f | %.2f× | ≤ %.1f× | %g / %g | %s |\n",
				r.title, c, median(sl), median(an), ratio, r.bar, sa, aa, verdict)
		}
	}
}

func printMiddleware(rounds []map[string]result, cpus []string) {
	fmt.Println("| httplimit handler | -cpu | serial ns/op over bare | RunParallel ns/op over bare | B/op | allocs/op |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, h := range middleware {
		for _, c := range cpus {
			var ser, par []float64
			var res result
			for _, m := range rounds {
				name := "Middleware/handler=" + h
				s, ok1 := m[key(name+"/mode=serial", c)]
				p, ok2 := m[key(name+"/mode=parallel", c)]
				bs := m[key("Middleware/handler=bare/mode=serial", c)]
				bp := m[key("Middleware/handler=bare/mode=parallel", c)]
				if !ok1 || !ok2 {
					continue
				}
				ser, par = append(ser, s.ns-bs.ns), append(par, p.ns-bp.ns)
				res = s
			}
			if len(ser) == 0 {
				continue
			}
			fmt.Printf("| %s | %s | %.0f | %.0f | %g | %g |\n", h, c, median(ser), median(par), res.bytes, res.allocs)
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
