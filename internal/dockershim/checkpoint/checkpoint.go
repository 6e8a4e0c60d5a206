// Package checkpoint stores pod sandbox checkpoints on disk: one JSON file per sandbox,
// written atomically (temp file, fsync, rename, fsync of the directory) and protected by
// a SHA-256 checksum, so that the dockershim can recover a sandbox's network state and
// port mappings after a restart.
//
// Only the dockershim (internal/dockershim and its subpackages) may import it. It
// imports no other package of this project.
package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
)

// Sentinel errors returned (wrapped) by Store. Match them with errors.Is.
var (
	// ErrNotFound: no checkpoint exists for the id.
	ErrNotFound = errors.New("checkpoint not found")
	// ErrCorrupt: the checkpoint file exists but cannot be trusted (bad JSON, unknown
	// version, checksum mismatch, or a different id inside).
	ErrCorrupt = errors.New("checkpoint corrupt")
)

// Version is the only checkpoint format version this package reads and writes.
const Version = "v1"

const (
	// tempPrefix starts the name of every temporary file; List ignores such files and
	// valid ids can never start with a dot.
	tempPrefix = ".tmp-"
	// maxFileSize bounds what Read loads; a real checkpoint is a few hundred bytes.
	maxFileSize = 4 << 20
)

// PortMapping is one host port mapping of a sandbox.
type PortMapping struct {
	Protocol      string `json:"protocol"`
	ContainerPort int32  `json:"container_port"`
	HostPort      int32  `json:"host_port"`
	HostIP        string `json:"host_ip,omitempty"`
}

// PodSandbox is the state of one pod sandbox that must survive a shim restart.
type PodSandbox struct {
	// ID is the sandbox (pause container) ID; it names the checkpoint file.
	ID          string `json:"id"`
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	UID         string `json:"uid"`
	HostNetwork bool   `json:"host_network"`

	PortMappings []PortMapping `json:"port_mappings,omitempty"`
	// IPs are the pod IPs from the CNI ADD result, primary first.
	IPs []string `json:"ips,omitempty"`
	// NetworkSetUp is true when CNI ADD succeeded and DEL has not yet succeeded.
	NetworkSetUp bool      `json:"network_set_up"`
	CreatedAt    time.Time `json:"created_at"`
}

// envelope is the on-disk format of a checkpoint file.
type envelope struct {
	Version  string          `json:"version"`
	Data     json.RawMessage `json:"data"`
	Checksum string          `json:"checksum"`
}

// Store reads and writes checkpoints in one directory. It is safe for concurrent use;
// concurrent writes of the same id leave one complete checkpoint (the last rename wins).
type Store struct {
	dir string
}

// New returns a Store over dir, creating dir with mode 0700 if it is missing.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("checkpoint: directory is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: create directory %q: %w", dir, err)
	}
	removeTemps(dir)
	return &Store{dir: dir}, nil
}

// removeTemps removes the temporary files of writes that a crash (kill -9
// between write and rename) cut short. The directory is one shim's private
// state: when its store opens, no write of its own is in flight.
func removeTemps(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) && e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// validateID rejects ids that could escape the directory or collide with temp files.
func validateID(id string) error {
	switch {
	case id == "":
		return errors.New("checkpoint: empty id")
	case strings.ContainsAny(id, `/\`+"\x00"):
		return fmt.Errorf("checkpoint: invalid id %q: contains a path separator or NUL", id)
	case strings.Contains(id, ".."):
		return fmt.Errorf("checkpoint: invalid id %q: contains \"..\"", id)
	case strings.HasPrefix(id, "."):
		return fmt.Errorf("checkpoint: invalid id %q: starts with a dot", id)
	}
	return nil
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id) }

// checksum is the hex SHA-256 of the canonical (compact JSON) data bytes.
func checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Write stores cp atomically under cp.ID, replacing any previous checkpoint.
func (s *Store) Write(cp *PodSandbox) error {
	if cp == nil {
		return errors.New("checkpoint: nil checkpoint")
	}
	if err := validateID(cp.ID); err != nil {
		return err
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("checkpoint %s: encode data: %w", cp.ID, err)
	}
	content, err := json.Marshal(envelope{Version: Version, Data: data, Checksum: checksum(data)})
	if err != nil {
		return fmt.Errorf("checkpoint %s: encode file: %w", cp.ID, err)
	}
	if err := s.writeAtomic(cp.ID, content); err != nil {
		return fmt.Errorf("checkpoint %s: %w", cp.ID, err)
	}
	return nil
}

// writeAtomic writes content to a temp file in the store's directory, syncs it, renames
// it over the checkpoint file and syncs the directory.
func (s *Store) writeAtomic(id string, content []byte) (retErr error) {
	f, err := os.CreateTemp(s.dir, tempPrefix+id+"-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if retErr != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(content); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	faultinject.Kill("checkpoint.before-rename")
	if err := os.Rename(tmp, s.path(id)); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(s.dir)
}

// syncDir makes a rename or unlink in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// Read loads the checkpoint of id. It returns an error wrapping ErrNotFound when there is
// none, and one wrapping ErrCorrupt when the file cannot be trusted.
func (s *Store) Read(id string) (*PodSandbox, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	content, err := readFile(s.path(id), id)
	if err != nil {
		return nil, err
	}
	cp, err := decode(content)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w: %w", id, ErrCorrupt, err)
	}
	if cp.ID != id {
		return nil, fmt.Errorf("checkpoint %s: %w: file holds id %q", id, ErrCorrupt, cp.ID)
	}
	return cp, nil
}

// readFile reads at most maxFileSize+1 bytes of a checkpoint file; a missing
// file is ErrNotFound. name is what errors call it.
func readFile(path, name string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	defer f.Close()
	content, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: read: %w", name, err)
	}
	return content, nil
}

// decode parses and verifies a checkpoint file's content.
func decode(content []byte) (*PodSandbox, error) {
	if len(content) > maxFileSize {
		return nil, fmt.Errorf("file larger than %d bytes", maxFileSize)
	}
	var env envelope
	if err := json.Unmarshal(content, &env); err != nil {
		return nil, fmt.Errorf("decode file: %w", err)
	}
	if env.Version != Version {
		return nil, fmt.Errorf("unsupported version %q", env.Version)
	}
	if len(env.Data) == 0 {
		return nil, errors.New("no data")
	}
	var canonical bytes.Buffer
	if err := json.Compact(&canonical, env.Data); err != nil {
		return nil, fmt.Errorf("decode data: %w", err)
	}
	if got := checksum(canonical.Bytes()); got != env.Checksum {
		return nil, fmt.Errorf("checksum mismatch: file says %q, data hashes to %q", env.Checksum, got)
	}
	var cp PodSandbox
	if err := json.Unmarshal(canonical.Bytes(), &cp); err != nil {
		return nil, fmt.Errorf("decode data: %w", err)
	}
	return &cp, nil
}

// Delete removes the checkpoint of id. Deleting a missing checkpoint succeeds.
func (s *Store) Delete(id string) error {
	if err := validateID(id); err != nil {
		return err
	}
	err := os.Remove(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: delete: %w", id, err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("checkpoint %s: delete: %w", id, err)
	}
	return nil
}

// List returns the ids of all checkpoint files, sorted. Temp files, directories and
// names that are not valid ids are ignored. It does not verify the files.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", s.dir, err)
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.Type().IsRegular() || validateID(e.Name()) != nil {
			continue
		}
		ids = append(ids, e.Name())
	}
	return ids, nil
}
