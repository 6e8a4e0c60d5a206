package options

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
)

// dropinExtension is the suffix of the --config-dir files that are read.
const dropinExtension = ".conf"

// mergeConfigDir merges the KubeletConfiguration drop-ins of dir over c, as
// upstream's --config-dir: every *.conf file under dir, subdirectories
// included, in lexical order of the path, each a JSON merge patch (RFC 7386)
// of the fields it sets (maps merge key by key, lists are replaced, null
// removes a field); then the defaults fill what is unset again. It returns
// the files skipped for their extension.
func mergeConfigDir(c *kubeletv1beta1.KubeletConfiguration, dir string) ([]string, error) {
	base, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal base config: %w", err)
	}
	var skipped []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Ext(d.Name()) != dropinExtension {
			skipped = append(skipped, path)
			return nil
		}
		patch, err := loadDropin(path)
		if err != nil {
			return fmt.Errorf("failed to load kubelet dropin file, path: %s, error: %w", path, err)
		}
		if base, err = jsonpatch.MergePatch(base, patch); err != nil {
			return fmt.Errorf("failed to merge drop-in and current config: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to walk through kubelet dropin directory %q: %w", dir, err)
	}
	var merged kubeletv1beta1.KubeletConfiguration
	if err := json.Unmarshal(base, &merged); err != nil {
		return nil, fmt.Errorf("failed to unmarshal merged JSON into kubelet configuration: %w", err)
	}
	kubeletconfig.SetDefaults(&merged)
	kubeletconfig.ApplyEvictionHardDefaults(&merged)
	*c = merged
	return skipped, nil
}

// loadDropin reads one drop-in, checks it strictly (apiVersion/kind, known
// fields, types) and returns exactly the fields it sets, as JSON.
func loadDropin(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if _, err := kubeletconfig.Decode(data); err != nil {
		return nil, err
	}
	return yaml.YAMLToJSON(data)
}

// configPathsFromArgs finds --config and --config-dir in args before the full
// parse, so that the file and its drop-ins are loaded first and every flag
// then overrides them.
func configPathsFromArgs(args []string) (file, dir string) {
	fs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	path := fs.String("config", "", "")
	dropins := fs.String("config-dir", "", "")
	fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return "", "" // the full parse reports flag errors
	}
	return *path, *dropins
}
