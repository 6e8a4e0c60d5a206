package archtest

import (
	"go/ast"
	"go/token"
	"testing"
)

// unguardedGoroutines are the goroutines the Go file f starts (a go
// statement, or a one-argument X.Go(fn) of sync.WaitGroup or errgroup)
// whose function literal does not begin by deferring logging.HandleCrash
// (or a recover of its own): a panic there would leave through Go's default
// handler, on stderr, without the logger. lifecycle.Loops.Go (three
// arguments) guards its loops itself. A named function started directly
// counts as unguarded: wrap it in a literal that defers the handler.
func unguardedGoroutines(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		var fn ast.Expr
		switch g := n.(type) {
		case *ast.GoStmt:
			fn = g.Call.Fun
		case *ast.CallExpr:
			sel, ok := g.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Go" || len(g.Args) != 1 {
				return true
			}
			fn = g.Args[0]
		default:
			return true
		}
		if lit, ok := fn.(*ast.FuncLit); !ok || !guardsCrash(lit.Body) {
			out = append(out, fset.Position(n.Pos()).String())
		}
		return true
	})
	return out
}

// guardsCrash reports whether body defers logging.HandleCrash (HandleCrash
// inside package logging) or a function literal that calls recover, before
// anything else can panic: among its leading defer statements.
func guardsCrash(body *ast.BlockStmt) bool {
	for _, st := range body.List {
		d, ok := st.(*ast.DeferStmt)
		if !ok {
			return false
		}
		switch fun := d.Call.Fun.(type) {
		case *ast.SelectorExpr:
			if fun.Sel.Name == "HandleCrash" {
				return true
			}
		case *ast.Ident:
			if fun.Name == "HandleCrash" {
				return true
			}
		case *ast.FuncLit:
			found := false
			ast.Inspect(fun.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "recover" {
						found = true
					}
				}
				return !found
			})
			if found {
				return true
			}
		}
	}
	return false
}

// TestGoroutinesHandleCrash: every goroutine of the product logs its panic
// through the logger (logging.HandleCrash, which then re-panics as
// upstream's HandleCrash does) instead of dying through Go's default
// handler.
func TestGoroutinesHandleCrash(t *testing.T) {
	fset := token.NewFileSet()
	for _, f := range productGoFiles(t, fset) {
		for _, pos := range unguardedGoroutines(fset, f) {
			t.Errorf("%s: a goroutine without defer logging.HandleCrash(...) first", pos)
		}
	}
}
