// Command specs reads the JSON reports of ginkgo (a dry run or a real run of
// e2e.test) for scripts/conformance.sh:
//
//	specs list [-shard I/N] [-match RE] REPORT.json
//	                                      the full text of every spec the run
//	                                      would run (a dry run) or ran, sorted;
//	                                      with -shard, only shard I of N; with
//	                                      -match, only texts RE matches
//	specs regex REPORT.json < TEXTS       a Go regexp for ginkgo's --focus
//	                                      that matches exactly the spec texts
//	                                      on stdin (one per line)
//	specs summary REPORT.json             counts (passed, failed, skipped,
//	                                      ...), the failed specs with the first
//	                                      line of their failure, the slowest
//	                                      specs
//	specs table -specs DRY.json [-skip skip.txt] [-anchor REPORT.json,...]
//	    [-anchor2 NAME=REPORT.json,...] REPORT.json...
//	                                      the Markdown results table of
//	                                      docs/conformance.md: for every spec
//	                                      the dry run selected, its
//	                                      outcome in the reports of this
//	                                      kubelet, of the anchor and of a
//	                                      second anchor (NAME: cri-dockerd),
//	                                      counted by area, then every spec
//	                                      that did not pass here or failed on
//	                                      an anchor; a later report's outcome
//	                                      replaces an earlier one's (a re-run
//	                                      of some specs)
//
// A spec's shard is fnv-1a(full text) mod N: stable across runs and machines,
// independent of the order ginkgo lists specs in, and it only moves when the
// spec's text changes.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "list":
		err = list(os.Args[2:])
	case "regex":
		err = regex(os.Args[2:])
	case "summary":
		err = summary(os.Args[2:])
	case "table":
		err = table(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "specs:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: specs list [-shard I/N] [-match RE] REPORT.json | regex REPORT.json < TEXTS | summary REPORT.json | table -specs DRY.json [-skip skip.txt] [-anchor R.json,...] [-anchor2 NAME=R.json,...] R.json...")
	os.Exit(2)
}

func readReports(path string) ([]types.Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(reports) == 0 {
		return nil, fmt.Errorf("%s: no suite report", path)
	}
	return reports, nil
}

// specs returns the reports of the It nodes (not the suite-level setup nodes).
func specs(reports []types.Report) []types.SpecReport {
	var out []types.SpecReport
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType == types.NodeTypeIt {
				out = append(out, s)
			}
		}
	}
	return out
}

// Shard returns the 0-based shard of a spec text among n shards.
func Shard(text string, n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	return int(h.Sum64() % uint64(n))
}

func parseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("bad shard %q: want I/N with 1 <= I <= N", s)
	}
	return i, n, nil
}

func list(args []string) error {
	fs := flag.NewFlagSet("list", flag.ExitOnError)
	shard := fs.String("shard", "1/1", "I/N: only the specs of shard I of N")
	match := fs.String("match", "", "Go regexp: only the spec texts it matches")
	_ = fs.Parse(args)
	re, err := regexp.Compile(*match)
	if err != nil {
		return fmt.Errorf("-match: %w", err)
	}
	if fs.NArg() != 1 {
		usage()
	}
	i, n, err := parseShard(*shard)
	if err != nil {
		return err
	}
	reports, err := readReports(fs.Arg(0))
	if err != nil {
		return err
	}
	var texts []string
	for _, s := range specs(reports) {
		// A dry run reports the specs it would run as passed.
		if s.State.Is(types.SpecStateSkipped | types.SpecStatePending) {
			continue
		}
		t := s.FullText()
		if Shard(t, n) == i-1 && re.MatchString(t) {
			texts = append(texts, t)
		}
	}
	sort.Strings(texts)
	for _, t := range texts {
		if strings.Contains(t, "\n") {
			return fmt.Errorf("spec text with a newline: %q", t)
		}
		fmt.Println(t)
	}
	return nil
}

// regex: ginkgo matches --focus against "<suite description> <spec text>".
func regex(args []string) error {
	if len(args) != 1 {
		usage()
	}
	reports, err := readReports(args[0])
	if err != nil {
		return err
	}
	var alts []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if t := sc.Text(); t != "" {
			alts = append(alts, regexp.QuoteMeta(t))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(alts) == 0 {
		return fmt.Errorf("no spec texts on stdin")
	}
	re := "^" + regexp.QuoteMeta(reports[0].SuiteDescription+" ") + "(?:" + strings.Join(alts, "|") + ")$"
	if _, err := regexp.Compile(re); err != nil {
		return err
	}
	fmt.Println(re)
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 300
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

func summary(args []string) error {
	if len(args) != 1 {
		usage()
	}
	reports, err := readReports(args[0])
	if err != nil {
		return err
	}
	all := specs(reports)
	counts := map[string]int{}
	var failed, setupFailed []types.SpecReport
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt && s.State.Is(types.SpecStateFailureStates) {
				setupFailed = append(setupFailed, s)
			}
		}
	}
	var ran []types.SpecReport
	for _, s := range all {
		counts[s.State.String()]++
		if s.State.Is(types.SpecStateFailureStates) {
			failed = append(failed, s)
		}
		if s.State.Is(types.SpecStatePassed | types.SpecStateFailureStates) {
			ran = append(ran, s)
		}
	}
	var total time.Duration
	for _, r := range reports {
		total += r.RunTime
	}
	fmt.Printf("%d passed, %d failed, %d skipped (%d specs in the suite, run time %s)\n",
		counts["passed"], len(failed), counts["skipped"]+counts["pending"], len(all), total.Round(time.Second))
	var states []string
	for k, v := range counts {
		states = append(states, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(states)
	fmt.Printf("states: %s\n", strings.Join(states, " "))
	for _, s := range setupFailed {
		fmt.Printf("\nSETUP FAILED: %s %s (%s): %s\n", s.LeafNodeType, s.LeafNodeText, s.State, firstLine(s.Failure.Message))
	}
	if len(failed) > 0 {
		sort.Slice(failed, func(i, j int) bool { return failed[i].FullText() < failed[j].FullText() })
		fmt.Printf("\nfailed:\n")
		for _, s := range failed {
			fmt.Printf("- %s\n    %s at %s: %s\n", s.FullText(), s.State, s.Failure.Location, firstLine(s.Failure.Message))
		}
	}
	sort.Slice(ran, func(i, j int) bool { return ran[i].RunTime > ran[j].RunTime })
	if len(ran) > 10 {
		ran = ran[:10]
	}
	if len(ran) > 0 {
		fmt.Printf("\nslowest:\n")
		for _, s := range ran {
			fmt.Printf("- %6s %s\n", s.RunTime.Round(time.Second), s.FullText())
		}
	}
	return nil
}
