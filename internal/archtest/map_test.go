package archtest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// architectureDoc is docs/ARCHITECTURE.md, relative to this package's
// directory (the working directory of its tests).
const architectureDoc = "../../docs/ARCHITECTURE.md"

// packageMapHeading is the heading of the section whose tables list the
// packages; the section ends at the next heading of the same level.
const packageMapHeading = "## Package map"

// rootRow is how the map names the package at the module root.
const rootRow = "."

// parsePackageMap returns the package paths of the package map of an
// ARCHITECTURE.md: the first cell of every data row of every table in the
// "## Package map" section, which must be one backticked path. Problems are
// rows whose first cell is not a backticked path, paths listed twice and a
// missing section.
func parsePackageMap(markdown string) (paths, problems []string) {
	inSection, found := false, false
	seen := map[string]int{}
	// tableRow counts the rows of the current table: 1 is the header, 2 the
	// delimiter row, the rest are data rows.
	tableRow := 0
	for i, line := range strings.Split(markdown, "\n") {
		lineNo := i + 1
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "## ") {
			inSection = trimmed == packageMapHeading
			found = found || inSection
			tableRow = 0
			continue
		}
		if !inSection {
			continue
		}
		if !strings.HasPrefix(trimmed, "|") {
			tableRow = 0
			continue
		}
		tableRow++
		if tableRow <= 2 {
			continue
		}
		cells := strings.Split(strings.Trim(trimmed, "|"), "|")
		first := strings.TrimSpace(cells[0])
		path, ok := strings.CutPrefix(first, "`")
		if ok {
			path, ok = strings.CutSuffix(path, "`")
		}
		if !ok || path == "" || strings.ContainsAny(path, "` ") {
			problems = append(problems, fmt.Sprintf("line %d: first cell %q is not one backticked package path", lineNo, first))
			continue
		}
		if prev, dup := seen[path]; dup {
			problems = append(problems, fmt.Sprintf("line %d: %s already has a row (line %d)", lineNo, path, prev))
			continue
		}
		seen[path] = lineNo
		paths = append(paths, path)
	}
	if !found {
		problems = append(problems, fmt.Sprintf("no %q section", packageMapHeading))
	}
	return paths, problems
}

// relativePackages turns the import paths of `go list ./...` into the map's
// form: relative to the module root, the root package itself as ".".
func relativePackages(module string, importPaths []string) []string {
	var out []string
	for _, p := range importPaths {
		switch {
		case p == module:
			out = append(out, rootRow)
		case strings.HasPrefix(p, module+"/"):
			out = append(out, strings.TrimPrefix(p, module+"/"))
		default:
			out = append(out, p) // not of the module: reported as missing
		}
	}
	return out
}

// compareMap returns the packages without a row and the rows naming no
// package, each sorted.
func compareMap(rows, packages []string) (missing, unknown []string) {
	inMap := map[string]bool{}
	for _, r := range rows {
		inMap[r] = true
	}
	exists := map[string]bool{}
	for _, p := range packages {
		exists[p] = true
		if !inMap[p] {
			missing = append(missing, p)
		}
	}
	for _, r := range rows {
		if !exists[r] {
			unknown = append(unknown, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(unknown)
	return missing, unknown
}

func TestParsePackageMap(t *testing.T) {
	t.Parallel()
	const sample = "# Architecture\n\n" +
		"| Package | Job |\n|---|---|\n| `internal/ignored` | a table outside the section |\n\n" +
		"## Package map\n\n" +
		"### cmd and app\n\n" +
		"| Package | Job | May import |\n" +
		"|---|---|---|\n" +
		"| `.` | the binary | app |\n" +
		"| `internal/app` | entry point | anything |\n\n" +
		"Text between two tables.\n\n" +
		"| Package | Job | May import |\n" +
		"|---|---|---|\n" +
		"| `internal/gone` | a package that no longer exists | nothing |\n" +
		"| internal/plain | no backticks | nothing |\n" +
		"| `internal/app` | listed twice | nothing |\n\n" +
		"## The flow\n\n" +
		"| `internal/other` | a table after the section |\n"
	rows, problems := parsePackageMap(sample)
	if want := []string{".", "internal/app", "internal/gone"}; !reflect.DeepEqual(rows, want) {
		t.Errorf("rows:\n got %q\nwant %q", rows, want)
	}
	wantProblems := []string{
		`line 21: first cell "internal/plain" is not one backticked package path`,
		"line 22: internal/app already has a row (line 14)",
	}
	if !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("problems:\n got %q\nwant %q", problems, wantProblems)
	}

	// internal/kubelet has no row, internal/gone has no package.
	module := "example.com/m"
	packages := relativePackages(module, []string{module, module + "/internal/app", module + "/internal/kubelet"})
	missing, unknown := compareMap(rows, packages)
	if want := []string{"internal/kubelet"}; !reflect.DeepEqual(missing, want) {
		t.Errorf("packages without a row: got %q, want %q", missing, want)
	}
	if want := []string{"internal/gone"}; !reflect.DeepEqual(unknown, want) {
		t.Errorf("rows without a package: got %q, want %q", unknown, want)
	}

	if _, problems := parsePackageMap("# Architecture\n\nNo map.\n"); len(problems) != 1 {
		t.Errorf("a document without the section: problems %q, want one", problems)
	}
}

// TestArchitectureMapComplete checks that docs/ARCHITECTURE.md has exactly
// one package map row per package of `go list ./...`.
func TestArchitectureMapComplete(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatalf("read the package map: %v", err)
	}
	rows, problems := parsePackageMap(string(doc))
	for _, p := range problems {
		t.Errorf("%s: %s", architectureDoc, p)
	}

	gomod := strings.TrimSpace(string(goCommand(t, ".", "env", "GOMOD")))
	if gomod == "" || gomod == "/dev/null" {
		t.Fatalf("not inside a Go module (GOMOD=%q)", gomod)
	}
	root := filepath.Dir(gomod)
	module := strings.TrimSpace(string(goCommand(t, root, "list", "-m", "-f", "{{.Path}}")))
	listed := strings.Fields(string(goCommand(t, root, "list", "./...")))
	packages := relativePackages(module, listed)
	// Without this package the listing is wrong, and every row would be
	// reported instead of the real gaps.
	if !slices.Contains(packages, "internal/archtest") {
		t.Fatalf("go list ./... in %s (module %q) does not list internal/archtest: %q", root, module, listed)
	}

	missing, unknown := compareMap(rows, packages)
	for _, p := range missing {
		t.Errorf("%s: package %s has no row in the package map: add one (| `%s` | its job | what it may import |)", architectureDoc, p, p)
	}
	for _, r := range unknown {
		t.Errorf("%s: the package map has a row for %s, which is not a package of the module (go list ./...): remove or rename it", architectureDoc, r)
	}
}
