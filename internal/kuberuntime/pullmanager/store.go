package pullmanager

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
)

// Record is an ImagePulledRecord: the credentials an image (by the runtime's
// image ref) was pulled with, per image name without tag or digest.
type Record = kubeletv1beta1.ImagePulledRecord

// Credentials is one image name's entry of a Record.
type Credentials = kubeletv1beta1.ImagePullCredentials

// Secret and ServiceAccount are the coordinates of a pull secret (with the
// hash of its credentials) and of a service account whose token a
// credential provider used.
type (
	Secret         = kubeletv1beta1.ImagePullSecret
	ServiceAccount = kubeletv1beta1.ImagePullServiceAccount
)

const (
	recordFilePrefix = "sha256-"
	tmpFileSuffix    = ".tmp"
	intentKind       = "ImagePullIntent"
	recordKind       = "ImagePulledRecord"
)

var (
	currentVersion = kubeletv1beta1.SchemeGroupVersion.String()
	alphaVersion   = kubeletv1alpha1.SchemeGroupVersion.String()
)

// store reads and writes the intents and records as upstream's kubelet does:
// one file per key named sha256-<hex sha256 of the key> (the pod's image
// string for an intent, the image ref for a record), compact JSON of the
// v1beta1 type with a trailing newline, written to a .tmp file and renamed
// (mode 0600) in directories of mode 0700.
type store struct {
	pullingDir, pulledDir string
}

// newStore makes the directories under root (the kubelet's root directory).
func newStore(root string) (*store, error) {
	s := &store{
		pullingDir: filepath.Join(root, "image_manager", "pulling"),
		pulledDir:  filepath.Join(root, "image_manager", "pulled"),
	}
	for _, d := range []string{s.pullingDir, s.pulledDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("pull records: %w", err)
		}
	}
	return s, nil
}

// migrate rewrites the files of an older version (v1alpha1) in the current
// one; the files it cannot read are the error, the others are migrated.
func (s *store) migrate() error {
	var errs []error
	errs = append(errs, eachFile(s.pullingDir, func(path string, data []byte) error {
		var intent kubeletv1beta1.ImagePullIntent
		current, err := decode(data, intentKind, &intent)
		if err != nil {
			return fmt.Errorf("failed to decode ImagePullIntent from file %q: %w", path, err)
		}
		if !current {
			return s.writeIntent(intent.Image)
		}
		return nil
	}))
	errs = append(errs, eachFile(s.pulledDir, func(path string, data []byte) error {
		var r Record
		current, err := decode(data, recordKind, &r)
		if err != nil {
			return fmt.Errorf("failed to decode ImagePulledRecord from file %q: %w", path, err)
		}
		if !current {
			return s.writeRecord(&r)
		}
		return nil
	}))
	return errors.Join(errs...)
}

func (s *store) writeIntent(image string) error {
	return s.write(s.pullingDir, image, &kubeletv1beta1.ImagePullIntent{Image: image}, intentKind)
}

func (s *store) deleteIntent(image string) error {
	return remove(filepath.Join(s.pullingDir, fileName(image)))
}

// intents lists the images of the intents on disk; unreadable files are
// skipped and returned as the error.
func (s *store) intents() ([]string, error) {
	var images []string
	err := eachFile(s.pullingDir, func(path string, data []byte) error {
		var intent kubeletv1beta1.ImagePullIntent
		if _, err := decode(data, intentKind, &intent); err != nil {
			return fmt.Errorf("failed to decode ImagePullIntent from file %q: %w", path, err)
		}
		images = append(images, intent.Image)
		return nil
	})
	return images, err
}

// record reads the record of imageRef; nil without one (or when the file
// holds another ref's record: a hash collision).
func (s *store) record(imageRef string) (*Record, error) {
	data, err := os.ReadFile(filepath.Join(s.pulledDir, fileName(imageRef)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var r Record
	if _, err := decode(data, recordKind, &r); err != nil {
		return nil, fmt.Errorf("failed to decode ImagePulledRecord of %q: %w", imageRef, err)
	}
	if r.ImageRef != imageRef {
		return nil, nil
	}
	return &r, nil
}

func (s *store) writeRecord(r *Record) error {
	return s.write(s.pulledDir, r.ImageRef, r, recordKind)
}

func (s *store) deleteRecord(imageRef string) error {
	return remove(filepath.Join(s.pulledDir, fileName(imageRef)))
}

// records lists the records on disk; unreadable files are skipped and
// returned as the error.
func (s *store) records() ([]*Record, error) {
	var out []*Record
	err := eachFile(s.pulledDir, func(path string, data []byte) error {
		var r Record
		if _, err := decode(data, recordKind, &r); err != nil {
			return fmt.Errorf("failed to deserialize content of file %q into ImagePulledRecord: %w", path, err)
		}
		out = append(out, &r)
		return nil
	})
	return out, err
}

// count returns the number of record files in dir (the on-disk gauges).
func count(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if isRecordFile(e) {
			n++
		}
	}
	return n, nil
}

// fileName is upstream's file name of a key.
func fileName(key string) string {
	return fmt.Sprintf("%s%x", recordFilePrefix, sha256.Sum256([]byte(key)))
}

func isRecordFile(e fs.DirEntry) bool {
	return !e.IsDir() && strings.HasPrefix(e.Name(), recordFilePrefix) && !strings.HasSuffix(e.Name(), tmpFileSuffix)
}

// write encodes obj (an intent or a record) as the current version and puts it
// in place atomically.
func (s *store) write(dir, key string, obj any, kind string) error {
	switch o := obj.(type) {
	case *kubeletv1beta1.ImagePullIntent:
		o.TypeMeta.Kind, o.TypeMeta.APIVersion = kind, currentVersion
	case *Record:
		o.TypeMeta.Kind, o.TypeMeta.APIVersion = kind, currentVersion
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(obj); err != nil {
		return fmt.Errorf("failed to serialize %s: %w", kind, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("failed to create directory %q: %w", dir, err)
	}
	target := filepath.Join(dir, fileName(key))
	tmp := target + tmpFileSuffix
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("failed to create temporary file %q: %w", tmp, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// decode reads an intent or record strictly (unknown or duplicate fields
// are errors, as upstream's strict codec), of the current version or
// v1alpha1 (current false: to be migrated).
func decode(data []byte, kind string, into any) (current bool, err error) {
	var meta struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return false, err
	}
	switch {
	case meta.Kind != kind:
		return false, fmt.Errorf("kind %q is not %s", meta.Kind, kind)
	case meta.APIVersion != currentVersion && meta.APIVersion != alphaVersion:
		return false, fmt.Errorf("no kind %q is registered for version %q", meta.Kind, meta.APIVersion)
	}
	strict, err := sigsjson.UnmarshalStrict(data, into, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return false, err
	}
	if len(strict) > 0 {
		return false, fmt.Errorf("strict decoding error: %w", errors.Join(strict...))
	}
	return meta.APIVersion == currentVersion, nil
}

// eachFile runs fn on each record file of dir (not .tmp files, not
// directories); errors are gathered, the walk goes on.
func eachFile(dir string, fn func(path string, data []byte) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !isRecordFile(e) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to read %q: %w", path, err))
			continue
		}
		if err := fn(path, data); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
