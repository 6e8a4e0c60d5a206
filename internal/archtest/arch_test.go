package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// pkgNode is one package of the import graph.
type pkgNode struct {
	// Imports are the packages the non-test files import.
	Imports []string
	// TestImports are the packages the _test.go files import (internal and
	// external test packages); only filled for the module's own packages.
	TestImports []string
	// Local marks a package of the main module.
	Local bool
}

// importGraph maps an import path to its node.
type importGraph map[string]pkgNode

// rule is one dependency boundary.
type rule struct {
	name string
	// appliesTo selects the local packages the rule constrains.
	appliesTo func(pkg string) bool
	// forbidden selects the imports those packages may not have.
	forbidden func(imp string) bool
	// transitive makes imports of imports count too (through non-test
	// imports of the dependencies).
	transitive bool
	// productOnly ignores the imports of the package's _test.go files.
	productOnly bool
}

// violation is one broken rule: Path runs from the offending package to the
// forbidden import.
type violation struct {
	Rule string
	Path []string
}

func (v violation) String() string {
	return fmt.Sprintf("%s: %s", v.Rule, strings.Join(v.Path, " -> "))
}

// under reports whether pkg is root or a package below it.
func under(pkg, root string) bool {
	return pkg == root || strings.HasPrefix(pkg, root+"/")
}

// anyUnder returns a predicate matching packages under any of roots.
func anyUnder(roots ...string) func(string) bool {
	return func(pkg string) bool {
		for _, r := range roots {
			if under(pkg, r) {
				return true
			}
		}
		return false
	}
}

// kubeletSide matches internal/kubelet... (internal/kubelet/*, and
// internal/kubeletserver), internal/kuberuntime and internal/cri.
func kubeletSide(module string) func(string) bool {
	rest := anyUnder(module+"/internal/kuberuntime", module+"/internal/cri")
	return func(pkg string) bool {
		return strings.HasPrefix(pkg, module+"/internal/kubelet") || rest(pkg)
	}
}

// boundaryRules returns the import rules of docs/ARCHITECTURE.md for the
// module path.
func boundaryRules(module string) []rule {
	shim := module + "/internal/dockershim"
	kubelet := kubeletSide(module)
	everyone := func(string) bool { return true }
	return []rule{
		{
			name:      "the dockershim must not import the kubelet side or internal/app",
			appliesTo: anyUnder(shim),
			forbidden: func(imp string) bool {
				return kubelet(imp) || under(imp, module+"/internal/app")
			},
			transitive: true,
		},
		{
			// Tests may: client-go's exec/attach/port-forward clients are the
			// real counterpart of the shim's streaming server.
			name:        "the dockershim must not import client-go (outside its tests)",
			appliesTo:   anyUnder(shim),
			forbidden:   anyUnder("k8s.io/client-go"),
			transitive:  true,
			productOnly: true,
		},
		{
			name:       "the kubelet side must not import the dockershim",
			appliesTo:  kubelet,
			forbidden:  anyUnder(shim),
			transitive: true,
		},
		{
			name:      "only internal/dockershim/libdocker may import github.com/docker/docker",
			appliesTo: func(pkg string) bool { return !under(pkg, shim+"/libdocker") },
			forbidden: anyUnder("github.com/docker/docker"),
		},
		{
			name:      "only internal/dockershim/network may import github.com/containernetworking/cni",
			appliesTo: func(pkg string) bool { return !under(pkg, shim+"/network") },
			forbidden: anyUnder("github.com/containernetworking/cni"),
		},
		{
			// The neutral leaf both halves may import (so it cannot lead either
			// half into the other).
			name:        "internal/procfs, internal/unixsock, internal/keylock and internal/promreg must not import any package of this module",
			appliesTo:   anyUnder(module+"/internal/procfs", module+"/internal/unixsock", module+"/internal/keylock", module+"/internal/promreg"),
			forbidden:   anyUnder(module),
			productOnly: true,
		},
		{
			name:        "internal/cgroups may import only internal/procfs of this module",
			appliesTo:   anyUnder(module + "/internal/cgroups"),
			forbidden:   func(imp string) bool { return under(imp, module) && !under(imp, module+"/internal/procfs") },
			productOnly: true,
		},
		{
			// The runtime manager sits below the kubelet's packages: the one
			// package under internal/kubelet it shares with them is the leaf
			// of shared pod/container types.
			name:      "internal/kuberuntime may import no package under internal/kubelet but internal/kubelet/container",
			appliesTo: anyUnder(module + "/internal/kuberuntime"),
			forbidden: func(imp string) bool {
				return under(imp, module+"/internal/kubelet") && !under(imp, module+"/internal/kubelet/container")
			},
			transitive:  true,
			productOnly: true,
		},
		{
			// One way only: the kubelet drives the runtime manager through
			// interfaces it declares and the types of internal/kubelet/container;
			// the composition root (internal/app) builds it. Tests may build one.
			name:        "no package under internal/kubelet or internal/kubeletserver may import internal/kuberuntime",
			appliesTo:   anyUnder(module+"/internal/kubelet", module+"/internal/kubeletserver"),
			forbidden:   anyUnder(module + "/internal/kuberuntime"),
			transitive:  true,
			productOnly: true,
		},
		{
			name:        "internal/kubelet/container must not import any package of this module",
			appliesTo:   anyUnder(module + "/internal/kubelet/container"),
			forbidden:   anyUnder(module),
			productOnly: true,
		},
		{
			name:        "internal/kubelet/resources may import only internal/procfs of this module",
			appliesTo:   anyUnder(module + "/internal/kubelet/resources"),
			forbidden:   func(imp string) bool { return under(imp, module) && !under(imp, module+"/internal/procfs") },
			productOnly: true,
		},
		{
			name:      "internal/kubelet/cm (and its subpackages) may import only internal/atomicfile, internal/cgroups, internal/lifecycle, internal/promreg, kubelet/cm/..., kubelet/container and kubelet/resources of this module",
			appliesTo: anyUnder(module + "/internal/kubelet/cm"),
			forbidden: func(imp string) bool {
				return under(imp, module) && !under(imp, module+"/internal/atomicfile") && !under(imp, module+"/internal/cgroups") && !under(imp, module+"/internal/lifecycle") &&
					!under(imp, module+"/internal/promreg") &&
					!under(imp, module+"/internal/kubelet/cm") &&
					!under(imp, module+"/internal/kubelet/container") && !under(imp, module+"/internal/kubelet/resources")
			},
			productOnly: true,
		},
		{
			// The lifecycle shape's loops: a leaf every component may embed.
			name:        "internal/lifecycle may import only internal/logging of this module",
			appliesTo:   anyUnder(module + "/internal/lifecycle"),
			forbidden:   func(imp string) bool { return under(imp, module) && !under(imp, module+"/internal/logging") },
			productOnly: true,
		},
		{
			// Test support (control plane, shim instances, a test CA) imports
			// "testing": product code must never link it.
			name:        "internal/testutil may only be imported by tests",
			appliesTo:   func(pkg string) bool { return !under(pkg, module+"/internal/testutil") },
			forbidden:   anyUnder(module + "/internal/testutil"),
			transitive:  true,
			productOnly: true,
		},
		{
			name:       "nothing may import k8s.io/kubernetes",
			appliesTo:  everyone,
			forbidden:  anyUnder("k8s.io/kubernetes"),
			transitive: true,
		},
	}
}

// checkGraph applies rules to every local package of g and returns the
// violations, sorted. For transitive rules it reports the shortest import
// path to each forbidden package.
func checkGraph(g importGraph, rules []rule) []violation {
	var out []violation
	for _, pkg := range sortedKeys(g) {
		node := g[pkg]
		if !node.Local {
			continue
		}
		withTests := append(append([]string(nil), node.Imports...), node.TestImports...)
		for _, r := range rules {
			if !r.appliesTo(pkg) {
				continue
			}
			direct := withTests
			if r.productOnly {
				direct = node.Imports
			}
			if !r.transitive {
				for _, imp := range dedup(direct) {
					if r.forbidden(imp) {
						out = append(out, violation{Rule: r.name, Path: []string{pkg, imp}})
					}
				}
				continue
			}
			for _, path := range forbiddenPaths(g, pkg, direct, r.forbidden) {
				out = append(out, violation{Rule: r.name, Path: path})
			}
		}
	}
	return out
}

// forbiddenPaths walks breadth-first from the direct imports of start and
// returns one shortest path to every forbidden package reached. It does not
// walk through forbidden packages.
func forbiddenPaths(g importGraph, start string, direct []string, forbidden func(string) bool) [][]string {
	parent := map[string]string{start: ""}
	queue := []string{}
	for _, imp := range dedup(direct) {
		if _, seen := parent[imp]; !seen {
			parent[imp] = start
			queue = append(queue, imp)
		}
	}
	var paths [][]string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if forbidden(cur) {
			var path []string
			for p := cur; p != ""; p = parent[p] {
				path = append([]string{p}, path...)
			}
			paths = append(paths, path)
			continue
		}
		for _, imp := range g[cur].Imports {
			if _, seen := parent[imp]; !seen {
				parent[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return paths
}

func sortedKeys(g importGraph) []string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// listedPackage holds the `go list -json` fields the loader reads.
type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Module       *struct{ Main bool }
}

// stripVariant turns "p [q.test]" into "p".
func stripVariant(path string) string {
	if i := strings.Index(path, " ["); i >= 0 {
		return path[:i]
	}
	return path
}

// parseGoList builds the graph from the JSON stream of
// `go list -e -deps -test -json`. Plain entries win; test variants
// ("p [q.test]") only fill in packages that have no plain entry, and the
// generated test mains ("p.test") and external test packages are skipped
// (their imports are the TestImports/XTestImports of the plain entry).
func parseGoList(r io.Reader) (importGraph, error) {
	g := importGraph{}
	variants := map[string][]string{}
	dec := json.NewDecoder(r)
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		name := stripVariant(p.ImportPath)
		if strings.HasSuffix(name, ".test") || strings.HasSuffix(name, "_test") {
			continue
		}
		if name != p.ImportPath {
			for _, imp := range p.Imports {
				variants[name] = append(variants[name], stripVariant(imp))
			}
			continue
		}
		node := pkgNode{Imports: p.Imports, Local: p.Module != nil && p.Module.Main}
		if node.Local {
			node.TestImports = append(append([]string(nil), p.TestImports...), p.XTestImports...)
		}
		g[name] = node
	}
	for name, imports := range variants {
		if _, ok := g[name]; !ok {
			g[name] = pkgNode{Imports: dedup(imports)}
		}
	}
	return g, nil
}

// goCommand runs the go tool in the module root and returns stdout.
func goCommand(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found in PATH: %v", err)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestDependencyBoundaries loads the import graph of every package of the
// module (with test imports) and checks the rules of boundaryRules.
func TestDependencyBoundaries(t *testing.T) {
	gomod := strings.TrimSpace(string(goCommand(t, ".", "env", "GOMOD")))
	if gomod == "" || gomod == "/dev/null" {
		t.Fatalf("not inside a Go module (GOMOD=%q)", gomod)
	}
	root := filepath.Dir(gomod)
	module := strings.TrimSpace(string(goCommand(t, root, "list", "-m", "-f", "{{.Path}}")))

	g, err := parseGoList(bytes.NewReader(goCommand(t, root, "list", "-e", "-deps", "-test", "-json", "./...")))
	if err != nil {
		t.Fatal(err)
	}
	// The rules are only as good as the graph: this package must be in it,
	// as a local package, or every rule would pass vacuously.
	if self := module + "/internal/archtest"; !g[self].Local {
		t.Fatalf("import graph lacks local package %s (module %q, %d packages)", self, module, len(g))
	}
	for _, v := range checkGraph(g, boundaryRules(module)) {
		t.Errorf("%v", v)
	}
}
