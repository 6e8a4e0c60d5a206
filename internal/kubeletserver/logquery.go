package kubeletserver

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The node log query (enableSystemLogQuery, the NodeLogQuery gate locked on
// in 1.37), as upstream's: GET /logs/?query=<service or file>[&query=...]
// with sinceTime, untilTime (RFC 3339), tailLines, boot and pattern. A
// service logging to the journal is read with journalctl; another is looked
// for as <dir>/<name>, <name>.log or <name>/<name>.log. A query naming one
// file (it holds a slash) serves that file of the log directory, without
// options. Nothing of the query reaches journalctl unchecked: services are
// [a-zA-Z0-9-_.:@] (256 at most, 4 services at most), the pattern must be a
// regular expression, and each value is one argument (no shell).

const (
	// logQueryDateLayout is how journalctl is given sinceTime and untilTime.
	logQueryDateLayout = "2006-1-2 15:4:5"
	logQueryMaxTail    = 100000
	logQueryMaxService = 256
	logQueryMaxQueries = 4
	// logQueryTimeout bounds one query's output.
	logQueryTimeout = 30 * time.Second
)

var unsafeServiceChars = regexp.MustCompile(`[^a-zA-Z\-_.:0-9@]+`)

// nodeLogQuery is a parsed query: services or files, and the options.
type nodeLogQuery struct {
	services, files []string
	logQueryOptions
}

// logQueryOptions narrow what journalctl returns.
type logQueryOptions struct {
	since, until *time.Time
	tail, boot   *int
	pattern      string
}

// parseNodeLogQuery reads the query parameters; nil, nil when none of them
// is there (a plain file request).
func parseNodeLogQuery(q url.Values) (*nodeLogQuery, field.ErrorList) {
	var errs field.ErrorList
	var n nodeLogQuery
	queries, asked := q["query"]
	for _, v := range queries {
		switch {
		case strings.ContainsAny(v, `/\`):
			n.files = append(n.files, v)
		case strings.TrimSpace(v) != "":
			n.services = append(n.services, v)
		}
	}
	if asked && len(n.files) == 0 && len(n.services) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("query"), queries, "may not be empty"))
	}
	parseTime := func(name string) *time.Time {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "invalid time format"))
			return nil
		}
		return &t
	}
	parseInt := func(name string) *int {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		i, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), v, err.Error()))
			return nil
		}
		return &i
	}
	n.since, n.until = parseTime("sinceTime"), parseTime("untilTime")
	n.boot, n.tail = parseInt("boot"), parseInt("tailLines")
	n.pattern = q.Get("pattern")
	if len(errs) > 0 {
		return nil, errs
	}
	if len(n.services) == 0 && len(n.files) == 0 && n.logQueryOptions == (logQueryOptions{}) {
		return nil, nil
	}
	return &n, nil
}

// validate checks a parsed query against logDir, the directory files are
// served from.
func (n *nodeLogQuery) validate(logDir string) field.ErrorList {
	var errs field.ErrorList
	queryPath := field.NewPath("query")
	for _, s := range n.services {
		if len(s) > logQueryMaxService {
			errs = append(errs, field.Invalid(queryPath, s, fmt.Sprintf("length must be less than %d", logQueryMaxService)))
		} else if unsafeServiceChars.MatchString(s) {
			errs = append(errs, field.Invalid(queryPath, s, "input contains unsupported characters"))
		}
	}
	if len(n.services) > logQueryMaxQueries {
		errs = append(errs, field.TooMany(queryPath, len(n.services), logQueryMaxQueries))
	}
	switch {
	case len(n.files) == 0 && len(n.services) == 0:
		errs = append(errs, field.Required(queryPath, "cannot be empty with options"))
	case len(n.files) > 0 && len(n.services) > 0:
		errs = append(errs, field.Invalid(queryPath, fmt.Sprintf("%v, %v", n.files, n.services), "cannot specify a file and service"))
	case len(n.files) > 1:
		errs = append(errs, field.Invalid(queryPath, n.files, "cannot specify more than one file"))
	case len(n.files) == 1 && n.logQueryOptions != (logQueryOptions{}):
		errs = append(errs, field.Invalid(queryPath, n.files, "cannot specify file with options"))
	case len(n.files) == 1:
		if root, err := os.OpenRoot(logDir); err != nil {
			errs = append(errs, field.Invalid(queryPath, n.files, err.Error()))
		} else {
			if _, err := root.Stat(n.files[0]); err != nil {
				errs = append(errs, field.Invalid(queryPath, n.files, err.Error()))
			}
			_ = root.Close()
		}
	}
	if n.since != nil && n.until != nil && n.since.After(*n.until) {
		errs = append(errs, field.Invalid(field.NewPath("untilTime"), n.until, "must be after `sinceTime`"))
	}
	if n.boot != nil && *n.boot > 0 {
		errs = append(errs, field.Invalid(field.NewPath("boot"), *n.boot, "must be less than 1"))
	}
	if n.tail != nil {
		if msgs := utilvalidation.IsInRange(*n.tail, 0, logQueryMaxTail); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("tailLines"), *n.tail, msgs[0]))
		}
	}
	if _, err := syntax.Parse(n.pattern, syntax.Perl); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("pattern"), n.pattern, err.Error()))
	}
	return errs
}

// journalArgs are journalctl's arguments for the query and services.
func (n *nodeLogQuery) journalArgs(services []string) []string {
	args := []string{"--utc", "--no-pager", "--output=short-precise"}
	if n.since != nil {
		args = append(args, "--since="+n.since.Format(logQueryDateLayout))
	}
	if n.until != nil {
		args = append(args, "--until="+n.until.Format(logQueryDateLayout))
	}
	if n.tail != nil {
		args = append(args, "--pager-end", "--lines="+strconv.Itoa(*n.tail))
	}
	for _, s := range services {
		args = append(args, "--unit="+s)
	}
	if n.pattern != "" {
		args = append(args, "--grep="+n.pattern)
	}
	if n.boot != nil {
		args = append(args, "--boot", strconv.Itoa(*n.boot))
	}
	return args
}

// journal runs journalctl; tests replace it.
type journal interface {
	// Units is journalctl --field _SYSTEMD_UNIT.
	Units(ctx context.Context) (string, error)
	// Run runs journalctl with args, writing its output (both streams) to w.
	Run(ctx context.Context, args []string, w io.Writer) error
}

// serveLogQuery answers a query request with the services' logs; a query of
// one file is left to the file server (file). Without query parameters it
// answers nothing.
func (a *api) serveLogQuery(w http.ResponseWriter, r *http.Request) (answered bool, file string) {
	n, errs := parseNodeLogQuery(r.URL.Query())
	if len(errs) > 0 {
		http.Error(w, errs.ToAggregate().Error(), http.StatusBadRequest)
		return true, ""
	}
	if n == nil {
		return false, ""
	}
	if r.URL.Path != "/logs/" {
		http.Error(w, "path not allowed in query mode", http.StatusNotAcceptable)
		return true, ""
	}
	if errs := n.validate(a.opts.LogDir); len(errs) > 0 {
		http.Error(w, errs.ToAggregate().Error(), http.StatusNotAcceptable)
		return true, ""
	}
	if len(n.files) == 1 {
		return false, n.files[0]
	}
	var out io.Writer = w
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	if r.Header.Get("Accept-Encoding") == "gzip" {
		w.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = gz
	}
	ctx, cancel := context.WithTimeout(r.Context(), logQueryTimeout)
	defer cancel()
	a.copyServiceLogs(ctx, n, out)
	return true, ""
}

// copyServiceLogs writes the logs of n's services: those the journal knows
// through journalctl, the others from their log files (when no option asks
// for what only the journal can do).
func (a *api) copyServiceLogs(ctx context.Context, n *nodeLogQuery, w io.Writer) {
	units, err := a.journal.Units(ctx)
	var inJournal, inFiles []string
	for _, s := range n.services {
		if err == nil && strings.Contains(units, s+".service") {
			inJournal = append(inJournal, s)
		} else {
			inFiles = append(inFiles, s)
		}
	}
	if len(inJournal) > 0 {
		// journalctl exiting with a status wrote its own message already.
		var exit *exec.ExitError
		if err := a.journal.Run(ctx, n.journalArgs(inJournal), w); err != nil && !errors.As(err, &exit) {
			boot := 0
			if n.boot != nil {
				boot = *n.boot
			}
			if boot == 0 {
				fmt.Fprintf(w, "\nerror: journal output not available\n")
			}
		}
	}
	if len(inFiles) > 0 && n.logQueryOptions != (logQueryOptions{}) {
		fmt.Fprintf(w, "\noptions present and query resolved to log files for %v\ntry without specifying options\n", inFiles)
		return
	}
	for _, s := range inFiles {
		if ctx.Err() != nil {
			fmt.Fprintf(w, "\ncontext error: %v\n", ctx.Err())
			return
		}
		copyServiceLogFile(ctx, w, a.opts.LogDir, s)
	}
}

// copyServiceLogFile writes service's log file: the first of <dir>/<s>,
// <s>.log and <s>/<s>.log that exists, opened inside dir.
func copyServiceLogFile(ctx context.Context, w io.Writer, dir, service string) {
	var err error
	for _, name := range []string{service, service + ".log", service + "/" + service + ".log"} {
		if err = copyLogFile(ctx, w, dir, name); !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(w, "\nlog not found for %s\n", service)
	case err != nil:
		fmt.Fprintf(w, "\nerror getting log for %s: %v\n", service, err)
	}
}

func copyLogFile(ctx context.Context, w io.Writer, dir, name string) error {
	f, err := os.OpenInRoot(dir, name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return os.ErrNotExist
	}
	_, err = io.Copy(w, ctxReader{ctx, f})
	return err
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
