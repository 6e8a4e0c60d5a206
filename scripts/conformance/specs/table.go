package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// outcome is what the reports say of one spec.
type outcome struct {
	state   string // "passed", "failed" (any failure state), or "" (not run)
	message string // first line of the failure
}

// outcomes maps the full text of every spec that ran in the reports at paths
// to its outcome; a later report's replaces an earlier one's.
func outcomes(paths []string) (map[string]outcome, error) {
	out := map[string]outcome{}
	for _, p := range paths {
		reports, err := readReports(p)
		if err != nil {
			return nil, err
		}
		for _, s := range specs(reports) {
			switch {
			case s.State.Is(types.SpecStatePassed):
				out[s.FullText()] = outcome{state: "passed"}
			case s.State.Is(types.SpecStateFailureStates):
				out[s.FullText()] = outcome{state: "failed", message: failureLine(s.Failure.Message)}
			}
		}
	}
	return out, nil
}

var (
	tagRE = regexp.MustCompile(`\s*\[[^\]]*\]`)
	// errRE finds the text of an error gomega prints as
	// <*errors.errorString | 0x...>: {s: "..."}.
	errRE = regexp.MustCompile(`\bs: "((?:[^"\\]|\\.)*)"`)
)

// failureLine is the gist of a failure message: its first line, or, when
// that line opens an object dump ("Verifying ... Pod: {"), the first error
// after the dump.
func failureLine(msg string) string {
	first := firstLine(msg)
	if !strings.HasSuffix(first, "{") {
		return first
	}
	rest := msg
	if i := strings.LastIndex(msg, "\n}"); i >= 0 {
		rest = msg[i+2:]
	}
	if m := errRE.FindStringSubmatch(rest); m != nil {
		rest = m[1]
	}
	return firstLine(strings.Join(strings.Fields(first+" ... "+rest), " "))
}

type counts struct{ passed, failed, skipped, notRun int }

// add counts o; skipped says the spec is one of skip.txt's.
func (c *counts) add(o outcome, skipped bool) {
	switch {
	case o.state == "passed":
		c.passed++
	case o.state == "failed":
		c.failed++
	case skipped:
		c.skipped++
	default:
		c.notRun++
	}
}

func (c counts) cells() string {
	return fmt.Sprintf("%d | %d | %d | %d", c.passed, c.failed, c.skipped, c.notRun)
}

// skipEntry is one regexp of skip.txt with the comment lines above it.
type skipEntry struct {
	re     *regexp.Regexp
	reason string
}

// readSkips parses skip.txt: Go regexps, each group of them after the
// comment lines that give their reason.
func readSkips(path string) ([]skipEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []skipEntry
	var comment []string
	afterRegexp := false // a comment line after regexps starts a new reason
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			comment, afterRegexp = nil, false
		case strings.HasPrefix(line, "#"):
			if afterRegexp {
				comment, afterRegexp = nil, false
			}
			comment = append(comment, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		default:
			re, err := regexp.Compile(line)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			out = append(out, skipEntry{re: re, reason: strings.Join(comment, " ")})
			afterRegexp = true
		}
	}
	return out, nil
}

// skipReason is the reason skip.txt gives for the spec whose ginkgo match
// text (suite description, space, full text) is text, or "".
func skipReason(skips []skipEntry, text string) string {
	for _, e := range skips {
		if e.re.MatchString(text) {
			if e.reason == "" {
				return "(no reason given)"
			}
			return e.reason
		}
	}
	return ""
}

func table(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	dry := fs.String("specs", "", "the JSON report of the dry run that selected the specs")
	anchor := fs.String("anchor", "", "comma-separated JSON reports of the anchor's runs, oldest first")
	second := fs.String("anchor2", "", "NAME=REPORT.json,...: a second anchor's runs (its columns and failures under NAME)")
	skipFile := fs.String("skip", "", "skip.txt: its regexps name the specs skipped for a reason of the machine")
	_ = fs.Parse(args)
	if *dry == "" || fs.NArg() == 0 {
		usage()
	}
	selected, err := readReports(*dry)
	if err != nil {
		return err
	}
	var skips []skipEntry
	if *skipFile != "" {
		if skips, err = readSkips(*skipFile); err != nil {
			return err
		}
	}
	// A dry run reports the specs it would run as passed.
	var texts []string
	area := map[string]string{}
	skipped := map[string]string{}
	for _, s := range specs(selected) {
		if s.State.Is(types.SpecStatePassed) {
			t := s.FullText()
			texts = append(texts, t)
			area[t] = topContainer(s)
			skipped[t] = skipReason(skips, selected[0].SuiteDescription+" "+t)
		}
	}
	sort.Strings(texts)
	this, err := outcomes(fs.Args())
	if err != nil {
		return err
	}
	// The series of columns: this kubelet, the anchor, the second anchor.
	type series struct {
		name string
		out  map[string]outcome
	}
	cols := []series{{name: "This kubelet", out: this}}
	for _, spec := range []struct{ name, paths string }{{"Anchor", *anchor}, {"", *second}} {
		name, paths := spec.name, spec.paths
		if name == "" {
			if paths == "" {
				continue
			}
			var ok bool
			if name, paths, ok = strings.Cut(paths, "="); !ok || name == "" {
				return fmt.Errorf("-anchor2 wants NAME=REPORT.json,..., got %q", spec.paths)
			}
		}
		var list []string
		if paths != "" {
			list = strings.Split(paths, ",")
		}
		out, err := outcomes(list)
		if err != nil {
			return err
		}
		cols = append(cols, series{name: name, out: out})
	}
	byArea := map[string][]counts{}
	total := make([]counts, len(cols))
	for _, t := range texts {
		a := area[t]
		if byArea[a] == nil {
			byArea[a] = make([]counts, len(cols))
		}
		sk := skipped[t] != ""
		for i, c := range cols {
			byArea[a][i].add(c.out[t], sk)
			total[i].add(c.out[t], sk)
		}
	}
	areas := make([]string, 0, len(byArea))
	for a := range byArea {
		areas = append(areas, a)
	}
	sort.Strings(areas)
	head, rule := "| Area | Specs |", "|---|---:|"
	for _, c := range cols {
		head += " " + c.name + ": passed | failed | skipped | not run |"
		rule += "---:|---:|---:|---:|"
	}
	fmt.Println(head)
	fmt.Println(rule)
	row := func(c []counts) string {
		cells := make([]string, len(c))
		for i := range c {
			cells[i] = c[i].cells()
		}
		return strings.Join(cells, " | ")
	}
	for _, a := range areas {
		c := byArea[a]
		n := c[0].passed + c[0].failed + c[0].skipped + c[0].notRun
		fmt.Printf("| %s | %d | %s |\n", a, n, row(c))
	}
	fmt.Printf("| **All** | **%d** | %s |\n", len(texts), row(total))
	fmt.Println()
	names := make([]string, 0, len(cols)-1)
	for _, c := range cols[1:] {
		names = append(names, strings.ToLower(c.name[:1])+c.name[1:])
	}
	fmt.Printf("Specs that did not pass on this kubelet or failed on the %s (skipped: the reason of scripts/conformance/skip.txt):\n", strings.Join(names, " or the "))
	fmt.Println()
	none := true
	for _, t := range texts {
		show := this[t].state != "passed"
		for _, c := range cols[1:] {
			show = show || c.out[t].state == "failed"
		}
		if !show {
			continue
		}
		none = false
		fmt.Printf("- %s\n", t)
		for i, c := range cols {
			name := "this kubelet"
			if i > 0 {
				name = names[i-1]
			}
			fmt.Printf("  - %s: %s\n", name, describe(c.out[t]))
		}
		if r := skipped[t]; r != "" {
			fmt.Printf("  - skipped: %s\n", r)
		}
	}
	if none {
		fmt.Println("- none")
	}
	return nil
}

func describe(o outcome) string {
	switch o.state {
	case "passed":
		return "passed"
	case "failed":
		return "failed: `" + strings.ReplaceAll(o.message, "`", "'") + "`"
	}
	return "not run"
}

// topContainer is a spec's top-level container without its tags, after its
// SIG: "[sig-node] Pods", "[sig-storage] ConfigMap".
func topContainer(s types.SpecReport) string {
	if len(s.ContainerHierarchyTexts) == 0 {
		return "(none)"
	}
	c := s.ContainerHierarchyTexts[0]
	sig := ""
	if strings.HasPrefix(c, "[sig-") {
		sig, c, _ = strings.Cut(c, " ")
		sig += " "
	}
	return sig + strings.TrimSpace(tagRE.ReplaceAllString(c, ""))
}
