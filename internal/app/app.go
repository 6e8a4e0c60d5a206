package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/kubelet-dockershim/kubelet/internal/app/options"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Main runs the binary and returns its exit status; only main exits.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	return 0
}

// Run parses args and runs the selected mode until ctx is cancelled.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	base, err := options.Base(args)
	if err != nil {
		return err
	}
	cfg := Config{Config: base}
	cmd := &cobra.Command{
		Use:           "kubelet",
		Short:         "A kubelet with the dockershim built in",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch cfg.ShowVersion {
			case "true":
				_, err := fmt.Fprintf(stdout, "Kubernetes %s\n", cfg.ReportedVersion)
				return err
			case "raw":
				_, err := fmt.Fprintf(stdout, "%#v\n", versionInfo(cfg.ReportedVersion))
				return err
			}
			if err := options.FinishFlags(cmd.Flags(), &cfg.Config); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			return runWithLogger(cmd.Context(), &cfg, stderr)
		},
	}
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	options.AddFlags(cmd.Flags(), &cfg.Config)
	return cmd.ExecuteContext(ctx)
}

// versionInfo is --version=raw's answer.
func versionInfo(v string) apimachineryversion.Info {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	return apimachineryversion.Info{Major: major, Minor: minor, GitVersion: v, GoVersion: runtime.Version(),
		Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// runWithLogger builds the logger (klog routed into it) and runs the mode.
func runWithLogger(ctx context.Context, cfg *Config, stderr io.Writer) error {
	level := zap.NewAtomicLevel()
	cfg.logLevel = &level
	opts := loggingOptions(&cfg.Kubelet.Logging, cfg.Verbosity)
	opts.Output, opts.Level = stderr, &level
	logger, err := logging.New(opts)
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	// The process logger of the crash handler for packages without a logger of
	// their own (logging.HandleCrash with nil).
	defer zap.ReplaceGlobals(logger)()
	// A panic in the foreground (start-up, the wait, the ordered shutdown) is
	// logged with its stack like one in a background loop.
	defer logging.HandleCrash(logger, "main")
	restore := logging.RouteKlog(logger, cfg.Verbosity, opts.VModule...)
	defer restore()
	if cfg.LockFilePath != "" {
		logger.Info("Acquiring file lock", zap.String("path", cfg.LockFilePath))
		lock, err := acquireLockFile(ctx, cfg.LockFilePath)
		if err != nil {
			return err
		}
		defer lock.Close()
		if cfg.ExitOnLockContention {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			logger.Info("Watching for inotify events", zap.String("path", cfg.LockFilePath))
			done, err := watchLockFileContention(ctx, cfg.LockFilePath, logger)
			if err != nil {
				return err
			}
			go func() {
				defer logging.HandleCrash(logger, "lock file contention")
				<-done
				cancel()
			}()
		}
	}
	if cfg.ExperimentalDockershim {
		return runShimOnly(ctx, cfg, logger)
	}
	return runNode(ctx, cfg, logger)
}

// notifyReady tells systemd (Type=notify) that the process is ready; a no-op elsewhere.
func notifyReady(logger *zap.Logger) {
	if ok, err := sdNotify("READY=1"); err != nil {
		logger.Warn("sd_notify", zap.Error(err))
	} else if ok {
		logger.Debug("notified systemd")
	}
}

// loggingOptions are the logger's options from the logging configuration:
// the format, -v, vmodule, and the format's split streams and info buffer
// (alpha, behind LoggingAlphaOptions as upstream checks at start).
func loggingOptions(c *logsapi.LoggingConfiguration, verbosity int) logging.Options {
	o := logging.Options{Verbosity: verbosity, Format: c.Format}
	for _, it := range c.VModule {
		o.VModule = append(o.VModule, logging.VModule{Pattern: it.FilePattern, Level: int(it.Verbosity)})
	}
	routing := c.Options.Text.OutputRoutingOptions
	if c.Format == logging.FormatJSON {
		routing = c.Options.JSON.OutputRoutingOptions
	}
	o.SplitStream, o.InfoBufferSize = routing.SplitStream, routing.InfoBufferSize.Value()
	return o
}
