package kubeletserver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container} with the
// query of v1.PodLogOptions (follow, previous, timestamps, tailLines or the
// legacy tail, limitBytes, sinceSeconds, sinceTime, stream).
func (a *api) containerLogs(w http.ResponseWriter, r *http.Request) {
	opts, code, err := parseLogOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	ref, _, ok := a.lookupPod(w, r, true)
	if !ok {
		return
	}
	fw := &flushWriter{w: w, follow: opts.Follow}
	if f, ok := w.(http.Flusher); ok {
		fw.flusher = f
	}
	var stdout, stderr io.Writer = fw, fw
	switch *opts.Stream {
	case v1.LogStreamStdout:
		stderr = nil
	case v1.LogStreamStderr:
		stdout = nil
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	err = a.host.GetContainerLogs(r.Context(), ref.namespace, ref.pod, ref.container, opts, stdout, stderr)
	if err == nil || r.Context().Err() != nil {
		return
	}
	switch {
	case !fw.committed:
		a.writeError(w, r, err, http.StatusBadRequest)
	case !fw.wrote:
		// Headers went out (follow) but no log line: the message is the answer.
		_, _ = io.WriteString(w, err.Error())
	default:
		a.logger.Info("Container log stream ended with an error", zap.String("path", r.URL.Path), zap.Error(err))
	}
}

// flushWriter writes the log to the response. When following it flushes every
// write, a zero-length one too, so the client sees the response start at once.
type flushWriter struct {
	w         io.Writer
	flusher   http.Flusher
	follow    bool
	committed bool // the response status is sent
	wrote     bool // log data was written
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if n > 0 {
		f.committed, f.wrote = true, true
	}
	if f.follow && f.flusher != nil {
		f.flusher.Flush()
		f.committed = true
	}
	return n, err
}

// parseLogOptions decodes and validates the log query as upstream does: a
// malformed value is 400, an invalid combination 422.
func parseLogOptions(q url.Values) (*v1.PodLogOptions, int, error) {
	if tail := q.Get("tail"); tail != "" { // the legacy name of tailLines
		q = cloneValues(q)
		q.Del("tail")
		if tail != "all" {
			q.Set("tailLines", tail)
		}
	}
	opts := &v1.PodLogOptions{
		Follow:     queryBool(q, "follow"),
		Previous:   queryBool(q, "previous"),
		Timestamps: queryBool(q, "timestamps"),
	}
	var err error
	if opts.TailLines, err = queryInt(q, "tailLines"); err != nil {
		return nil, http.StatusBadRequest, err
	}
	if opts.LimitBytes, err = queryInt(q, "limitBytes"); err != nil {
		return nil, http.StatusBadRequest, err
	}
	if opts.SinceSeconds, err = queryInt(q, "sinceSeconds"); err != nil {
		return nil, http.StatusBadRequest, err
	}
	if s, ok := q["sinceTime"]; ok && len(s) > 0 {
		t := &metav1.Time{}
		if err := t.UnmarshalQueryParameter(s[0]); err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("unable to decode query: sinceTime %q: %w", s[0], err)
		}
		opts.SinceTime = t
	}
	stream := v1.LogStreamAll
	if s := q.Get("stream"); s != "" {
		stream = s
	}
	opts.Stream = &stream
	if err := validateLogOptions(opts); err != nil {
		return nil, http.StatusUnprocessableEntity, err
	}
	return opts, http.StatusOK, nil
}

// validateLogOptions applies upstream's ValidatePodLogOptions.
func validateLogOptions(o *v1.PodLogOptions) error {
	switch {
	case o.TailLines != nil && *o.TailLines < 0:
		return errors.New("invalid request: tailLines must be greater than or equal to 0")
	case o.LimitBytes != nil && *o.LimitBytes < 1:
		return errors.New("invalid request: limitBytes must be greater than 0")
	case o.SinceSeconds != nil && o.SinceTime != nil:
		return errors.New("invalid request: at most one of sinceTime or sinceSeconds may be specified")
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		return errors.New("invalid request: sinceSeconds must be greater than 0")
	}
	switch *o.Stream {
	case v1.LogStreamAll:
	case v1.LogStreamStdout, v1.LogStreamStderr:
		if o.TailLines != nil {
			return errors.New("invalid request: tailLines and a specific stream are mutually exclusive")
		}
	default:
		return fmt.Errorf("invalid request: stream %q is not one of All, Stdout, Stderr", *o.Stream)
	}
	return nil
}

// queryBool decodes a boolean parameter as the API's parameter codec does:
// present means true unless it is "0" or "false".
func queryBool(q url.Values, name string) bool {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return false
	}
	return v[0] != "0" && v[0] != "false" && v[0] != "False" && v[0] != "FALSE"
}

// queryInt decodes an optional integer parameter.
func queryInt(q url.Values, name string) (*int64, error) {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return nil, nil
	}
	i, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("unable to decode query: %s %q is not an integer", name, v[0])
	}
	return &i, nil
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// nodeLogs serves GET /logs/<path> from opts.LogDir. The directory is opened as
// an os.Root, so neither ".." (refused before, too) nor a symlink can reach a
// file outside it.
//
// With SystemLogQuery, a request with query parameters is a node log query
// (serveLogQuery); one naming a single file serves that file.
func (a *api) nodeLogs(w http.ResponseWriter, r *http.Request) {
	if a.opts.SystemLogQuery {
		answered, file := a.serveLogQuery(w, r)
		if answered {
			return
		}
		if file != "" {
			r = r.Clone(r.Context())
			r.URL.Path = "/logs/" + strings.TrimPrefix(filepath.ToSlash(file), "/")
			r.URL.RawPath = ""
		}
	}
	root, err := os.OpenRoot(a.opts.LogDir)
	if err != nil {
		a.writeError(w, r, fmt.Errorf("open log directory: %w", err), http.StatusInternalServerError)
		return
	}
	defer root.Close()
	http.StripPrefix("/logs/", http.FileServerFS(confinedFS{root.FS()})).ServeHTTP(w, r)
}

// confinedFS reports every failure to open other than "does not exist" (a
// symlink leaving the root, a loop, no permission) as a permission error, which
// the file server answers with 403.
type confinedFS struct{ fs.FS }

func (c confinedFS) Open(name string) (fs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return f, err
}
