// Command crd-watcher watches Kubernetes resources chosen at run time —
// built-in kinds and CRDs, including CRDs installed or removed while it
// runs — with informerkit's shared informers, and prints every change.
//
// With no cluster configured it runs a demo against an embedded API server.
// See README.md for flags, output formats, metrics and exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "crd-watcher: %v\n(see crd-watcher --help)\n", err)
		return exitUsage
	}
	if cfg.Help {
		return exitOK
	}
	demo := noCluster(cfg, os.Getenv, fileExists)
	if demo && !cfg.Demo && (len(cfg.Resources) > 0 || cfg.All) {
		// Naming what to watch means a cluster was meant: do not start the
		// demo server and then fail to find the names there.
		fmt.Fprintf(stderr, "crd-watcher: no cluster configured: no --kubeconfig or --context, KUBECONFIG unset, not in a pod, and no %s; "+
			"point the watcher at a cluster, or add --demo to watch on the embedded demo server\n", homeKubeconfig())
		return exitError
	}
	if demo && cfg.Shard != "" {
		// The demo waits for the event of every step; a static shard holds
		// only some of the objects. (A --shard-group of one holds all.)
		fmt.Fprintf(stderr, "crd-watcher: --shard holds only part of the objects and the demo waits for every one of its events: use --shard with a cluster\n(see crd-watcher --help)\n")
		return exitUsage
	}
	if !demo && len(cfg.Resources) == 0 && !cfg.All {
		fmt.Fprintf(stderr, "crd-watcher: nothing to watch: name resources with --resource (or resources: in --config), or watch every resource with --all\n(see crd-watcher --help)\n")
		return exitUsage
	}
	// The metrics address is taken before anything contacts the API
	// server: a busy or unusable one is a usage error, whatever the
	// cluster does.
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			fmt.Fprintf(stderr, "crd-watcher: --metrics-addr: %v\n(see crd-watcher --help)\n", err)
			return exitUsage
		}
		metricsLn = ln
		defer ln.Close() // served from startWatching on (closing twice is harmless)
	}
	logger := setupLogging(cfg.Verbose, stderr)
	out := newPrinter(stdout, stderr, cfg.Output == "json", cfg.ShowObject)
	out.ignorePaths = cfg.IgnorePaths

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}

	if cfg.fleet() {
		return runFleet(ctx, cfg, out, stderr, logger)
	}

	var w *watcher
	var cp interface{ Stop() }
	code := func() int {
		if demo {
			demoDefaults(cfg)
			c, err := startDemoCluster(ctx, out, cfg.Verbose)
			if err != nil {
				return failed(ctx, stderr, err)
			}
			cp = c
			w, err = newWatcher(cfg, c.Config(), endpoint{Host: c.Config().Host, User: "embedded demo server"}, out, logger)
			if err != nil {
				return failed(ctx, stderr, err)
			}
			if code := startWatching(ctx, w, cfg, metricsLn, out, stderr, true); code >= 0 {
				return code
			}
			if err := runDemo(ctx, c, w); err != nil && ctx.Err() == nil {
				return failed(ctx, stderr, fmt.Errorf("demo: %w", err))
			}
			if cfg.Duration > 0 {
				return waitForEnd(ctx, w, stderr) // --duration in demo mode: keep watching until it elapses
			}
			return exitOK
		}
		restCfg, ep, err := restConfig(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "crd-watcher: no usable cluster configuration: %v\n", err)
			return exitError
		}
		out.info("watching %s", ep)
		w, err = newWatcher(cfg, restCfg, ep, out, logger)
		if err != nil {
			return failed(ctx, stderr, err)
		}
		if err := w.connect(ctx); err != nil {
			if ctx.Err() != nil {
				out.info("interrupted while connecting to %s", ep)
				return exitOK
			}
			fmt.Fprintf(stderr, "crd-watcher: %v\n", err)
			return exitError
		}
		if code := startWatching(ctx, w, cfg, metricsLn, out, stderr, false); code >= 0 {
			return code
		}
		return waitForEnd(ctx, w, stderr)
	}()
	if w != nil {
		w.shutdown()
	}
	if cp != nil {
		cp.Stop()
	}
	return code
}

// startWatching joins the shard group (--shard-group), resolves the
// resources, starts the informers, the progress reporter, the metrics
// server (on metricsLn, nil without --metrics-addr) and the SIGUSR1
// status table. It returns -1 when everything runs, else an exit code.
func startWatching(ctx context.Context, w *watcher, cfg *Config, metricsLn net.Listener, out *printer, stderr io.Writer, demo bool) int {
	if err := w.joinGroup(ctx, demo); err != nil {
		if ctx.Err() != nil {
			out.info("interrupted while joining shard group %s", cfg.ShardGroup)
			return exitOK
		}
		fmt.Fprintf(stderr, "crd-watcher: %v\n", err)
		return exitError
	}
	if err := w.setup(ctx); err != nil {
		if ctx.Err() != nil {
			out.info("interrupted while starting")
			return exitOK // interrupted while resolving names: a normal end
		}
		fmt.Fprintf(stderr, "crd-watcher: %v\n", err)
		var ue *usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitError
	}
	w.noteCRDAccess(ctx)
	if metricsLn != nil {
		m := serveMetrics(metricsLn, health{
			informers: w.metrics, statuses: w.factory.Statuses, counts: w.counts, contactErr: w.contactErr, lastContact: w.lastContact, group: w.group,
		})
		out.info("metrics: serving /metrics, /healthz, /readyz on http://%s", m.Addr())
		context.AfterFunc(ctx, m.Close)
	}
	w.start(ctx)
	go w.progress(ctx, cfg.Progress)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		defer signal.Stop(usr1)
		for {
			select {
			case <-ctx.Done():
				return
			case <-usr1:
				w.printStatus("status (SIGUSR1)")
			}
		}
	}()
	return -1
}

// waitForEnd waits for the end of the run: a signal or --duration (exit
// 0), or under --exit-on-failure the first failure (exit 3).
func waitForEnd(ctx context.Context, w *watcher, stderr io.Writer) int {
	select {
	case <-ctx.Done():
		return exitOK
	case err := <-w.failed:
		fmt.Fprintf(stderr, "crd-watcher: exiting (--exit-on-failure): %v\n", err)
		return exitFailure
	}
}

func failed(ctx context.Context, stderr io.Writer, err error) int {
	if ctx.Err() != nil {
		return exitOK // interrupted while starting: a normal end
	}
	fmt.Fprintf(stderr, "crd-watcher: %v\n", err)
	return exitError
}

// homeKubeconfig names ~/.kube/config for messages.
func homeKubeconfig() string {
	return "~/" + clientcmd.RecommendedHomeDir + "/" + clientcmd.RecommendedFileName
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// setupLogging routes klog (client-go's and, in demo mode, the embedded API
// server's logging) to stderr with --verbose and discards it otherwise; the
// library gets the same logger.
func setupLogging(verbose bool, stderr io.Writer) logr.Logger {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if verbose {
		_ = fs.Set("v", "2")
		klog.SetOutput(stderr)
		return klog.NewKlogr()
	}
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	klog.SetLogger(logr.Discard())
	return logr.Discard()
}
