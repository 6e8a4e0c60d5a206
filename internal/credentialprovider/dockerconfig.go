package credentialprovider

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

const (
	dockerConfigJSONName = "config.json"
	dockercfgName        = ".dockercfg"

	// dockerConfigLifetime is how long the node keyring keeps what it read
	// before looking at the files again.
	dockerConfigLifetime = 5 * time.Minute
)

// dockerConfig maps a registry (host[:port][/path], with or without a
// scheme) to its credentials, as in the docker CLI's config files.
type dockerConfig map[string]dockerConfigEntry

// dockerConfigEntry is one registry's credentials. Only the username and
// password (or the base64 "auth" holding both) are used; other fields of the
// docker CLI's entries (identitytoken, registrytoken) are ignored, as by the
// upstream kubelet.
type dockerConfigEntry struct {
	Username string
	Password string
	Email    string
}

// UnmarshalJSON reads an entry; a non-empty "auth" replaces username and
// password.
func (e *dockerConfigEntry) UnmarshalJSON(data []byte) error {
	var raw struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Email    string `json:"email,omitempty"`
		Auth     string `json:"auth,omitempty"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	e.Username, e.Password, e.Email = raw.Username, raw.Password, raw.Email
	if raw.Auth == "" {
		return nil
	}
	var err error
	e.Username, e.Password, err = decodeAuthField(raw.Auth)
	return err
}

// decodeAuthField decodes base64(username:password), padded or not.
func decodeAuthField(field string) (string, string, error) {
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		enc = base64.StdEncoding
	}
	decoded, err := enc.DecodeString(field)
	if err != nil {
		return "", "", err
	}
	user, pass, ok := strings.Cut(string(decoded), ":")
	if !ok {
		return "", "", errors.New("unable to parse auth field, must be formatted as base64(username:password)")
	}
	return user, pass, nil
}

// errUnmarshal hides the parse error, which may quote credentials.
var errUnmarshal = errors.New("error occurred while trying to unmarshal json")

// parseDockerConfigJSON reads the config.json format: {"auths": {...}}.
func parseDockerConfigJSON(data []byte) (dockerConfig, error) {
	var file struct {
		Auths dockerConfig `json:"auths"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, errUnmarshal
	}
	return file.Auths, nil
}

// parseDockercfg reads the legacy .dockercfg format: the entries at the top.
func parseDockercfg(data []byte) (dockerConfig, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, errUnmarshal
	}
	return cfg, nil
}

// dockerConfigSearch is where and how the node's Docker config is looked for.
type dockerConfigSearch struct {
	// jsonDirs are searched for config.json first, in order.
	jsonDirs []string
	// cfgDirs are searched for .dockercfg when no config.json was valid.
	cfgDirs []string
}

// defaultDockerConfigSearch is upstream's order with rootDir as the preferred
// path: rootDir, the working directory (""), $HOME/.docker (or $HOME), then
// /.docker (or /).
func defaultDockerConfigSearch(rootDir string) dockerConfigSearch {
	home, _ := os.UserHomeDir() // "" when unknown, as upstream
	return dockerConfigSearch{
		jsonDirs: []string{rootDir, "", filepath.Join(home, ".docker"), filepath.Join("/", ".docker")},
		cfgDirs:  []string{rootDir, "", home, "/"},
	}
}

// read returns the first valid config.json of jsonDirs, else the first valid
// .dockercfg of cfgDirs. Missing, unreadable and malformed files are skipped.
func (s dockerConfigSearch) read(logger *zap.Logger) (dockerConfig, error) {
	if cfg, err := firstValid(s.jsonDirs, dockerConfigJSONName, parseDockerConfigJSON, logger); err == nil {
		return cfg, nil
	}
	return firstValid(s.cfgDirs, dockercfgName, parseDockercfg, logger)
}

func firstValid(dirs []string, name string, parse func([]byte) (dockerConfig, error), logger *zap.Logger) (dockerConfig, error) {
	for _, dir := range dirs {
		path, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			logger.Error("Cannot make the docker config path absolute", zap.String("dir", dir), zap.Error(err))
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				logger.Debug("Cannot read docker config", zap.String("path", path), zap.Error(err))
			}
			continue
		}
		cfg, err := parse(data)
		if err != nil {
			logger.Debug("Invalid docker config", zap.String("path", path), zap.Error(err))
			continue
		}
		logger.Debug("Found docker config", zap.String("path", path))
		return cfg, nil
	}
	return nil, fmt.Errorf("couldn't find valid %s after checking in %v", name, dirs)
}

// dockerConfigKeyring is the node keyring: the Docker config files, re-read
// at most every lifetime.
type dockerConfigKeyring struct {
	search   dockerConfigSearch
	lifetime time.Duration
	clock    clock.PassiveClock
	logger   *zap.Logger

	mu      sync.Mutex
	keyring *basicKeyring // nil until first read
	expires time.Time
}

// NewDockerConfigKeyring returns the keyring of the node's Docker config
// files, looked for in rootDir (the kubelet's root directory), the working
// directory, $HOME/.docker/config.json, /.docker/config.json, then the legacy
// .dockercfg in rootDir, the working directory, $HOME and /. The first valid
// file wins; what was read is kept for five minutes. A nil logger logs
// nothing.
func NewDockerConfigKeyring(rootDir string, logger *zap.Logger) Keyring {
	return newDockerConfigKeyring(defaultDockerConfigSearch(rootDir), clock.RealClock{}, logger)
}

func newDockerConfigKeyring(search dockerConfigSearch, clk clock.PassiveClock, logger *zap.Logger) *dockerConfigKeyring {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &dockerConfigKeyring{
		search:   search,
		lifetime: dockerConfigLifetime,
		clock:    clk,
		logger:   logger.Named("docker-config"),
	}
}

// Lookup implements Keyring.
func (d *dockerConfigKeyring) Lookup(image string) ([]AuthConfig, bool) {
	return d.current().lookup(image)
}

// current returns the indexed config, reading the files when the kept copy
// has expired.
func (d *dockerConfigKeyring) current() *basicKeyring {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	if d.keyring != nil && now.Before(d.expires) {
		return d.keyring
	}
	cfg, err := d.search.read(d.logger)
	if err != nil {
		d.logger.Debug("No docker config file", zap.Error(err))
	}
	k := &basicKeyring{}
	k.add(cfg)
	d.keyring, d.expires = k, now.Add(d.lifetime)
	return k
}
