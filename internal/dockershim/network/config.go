package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// ErrNoNetworkConfig means the configuration directory holds no usable
// network configuration, so pods cannot get a network yet.
var ErrNoNetworkConfig = errors.New("no network config found")

// network is the loaded default network.
type network struct {
	list *libcni.NetworkConfigList
	file string // the file it came from
}

// validateFunc checks that a parsed network can be used (for example that
// its plugins exist and support its CNI version).
type validateFunc func(ctx context.Context, list *libcni.NetworkConfigList) error

// isConfFile reports whether name has an extension the kubelet and
// containerd read network configurations from.
func isConfFile(name string) bool {
	switch filepath.Ext(name) {
	case ".conflist", ".conf", ".json":
		return true
	}
	return false
}

// listConfFiles returns the configuration files of dir in lexical order. A
// missing dir holds no files.
func listConfFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading network config dir: %w", err)
	}
	var files []string
	for _, e := range entries {
		if e.IsDir() || !isConfFile(e.Name()) {
			continue
		}
		files = append(files, filepath.Join(dir, e.Name()))
	}
	return files, nil
}

// parseConfFile parses a configuration file into a network list: a
// .conflist as is, a .conf or .json single-plugin file wrapped into a list
// of one.
func parseConfFile(path string) (*libcni.NetworkConfigList, error) {
	var list *libcni.NetworkConfigList
	if filepath.Ext(path) == ".conflist" {
		l, err := libcni.NetworkConfFromFile(path)
		if err != nil {
			return nil, err
		}
		list = l
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		conf, err := libcni.NetworkPluginConfFromBytes(data)
		if err != nil {
			return nil, err
		}
		if list, err = wrapPluginConf(conf); err != nil {
			return nil, err
		}
	}
	if list.Name == "" {
		return nil, errors.New("network has no name")
	}
	if len(list.Plugins) == 0 {
		return nil, errors.New("network has no plugins")
	}
	return list, nil
}

// wrapPluginConf turns a single plugin configuration into a list holding
// only that plugin, keeping the plugin's original JSON.
func wrapPluginConf(conf *libcni.PluginConfig) (*libcni.NetworkConfigList, error) {
	var raw map[string]interface{}
	if err := json.Unmarshal(conf.Bytes, &raw); err != nil {
		return nil, fmt.Errorf("parsing plugin config: %w", err)
	}
	data, err := json.Marshal(map[string]interface{}{
		"name":       conf.Network.Name,
		"cniVersion": conf.Network.CNIVersion,
		"plugins":    []interface{}{raw},
	})
	if err != nil {
		return nil, fmt.Errorf("wrapping plugin config into a list: %w", err)
	}
	return libcni.NetworkConfFromBytes(data)
}

// selectDefault returns the first configuration file of dir, in lexical
// order, that parses and validates. The error, wrapping ErrNoNetworkConfig,
// names every file that was skipped and why.
func selectDefault(ctx context.Context, dir string, validate validateFunc) (*network, error) {
	files, err := listConfFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("%w in %s: %w", ErrNoNetworkConfig, dir, err)
	}
	var skipped []string
	for _, f := range files {
		list, err := parseConfFile(f)
		if err == nil {
			err = validate(ctx, list)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("loading network config %s: %w", f, ctx.Err())
			}
			skipped = append(skipped, fmt.Sprintf("%s: %v", filepath.Base(f), err))
			continue
		}
		return &network{list: list, file: f}, nil
	}
	if len(skipped) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoNetworkConfig, dir)
	}
	return nil, fmt.Errorf("%w in %s: %s", ErrNoNetworkConfig, dir, strings.Join(skipped, "; "))
}

// dirStamp summarizes everything that decides the default network: the conf
// dir itself (files added or removed), each configuration file (rewritten in
// place) and the plugin dirs (plugins installed later). Equal stamps mean
// nothing needs re-reading. It only stats, so it is cheap to call often.
func dirStamp(confDir string, binDirs []string) string {
	var b strings.Builder
	writeStat(&b, confDir)
	files, err := listConfFiles(confDir)
	if err != nil {
		fmt.Fprintf(&b, "list: %v\n", err)
	}
	for _, f := range files {
		writeStat(&b, f)
	}
	for _, d := range binDirs {
		writeStat(&b, d)
	}
	return b.String()
}

func writeStat(b *strings.Builder, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(b, "%s: %v\n", path, err)
		return
	}
	fmt.Fprintf(b, "%s %d %d %v\n", path, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
}
