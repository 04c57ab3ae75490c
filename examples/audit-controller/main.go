// Command audit-controller checks Kubernetes objects — built-in kinds and
// CRDs, including CRDs installed or removed while it runs — against rules
// (required labels and annotations, CEL expressions) and reports
// violations as Events on the objects, a summary ConfigMap and Prometheus
// metrics. It is built on informerkit's controller package.
//
// With no cluster configured it runs a demo against an embedded API
// server. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/informerkit/informerkit/shard/membership"
	"github.com/informerkit/informerkit/test/controlplane"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit code. Findings go to
// stdout, progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "audit-controller: %v\n(see audit-controller --help)\n", err)
		return exitUsage
	}
	if cfg.Help {
		return exitOK
	}
	demo := noCluster(cfg, os.Getenv, fileExists)
	if demo && cfg.Shard != "" {
		// The demo waits for findings on every object; a static shard
		// audits only some. (A --shard-group of one holds all.)
		fmt.Fprintf(stderr, "audit-controller: --shard audits only part of the objects and the demo waits for all of them: use --shard with a cluster\n")
		return exitUsage
	}
	if demo {
		demoDefaults(cfg)
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "audit-controller: %v\n", err)
		return exitUsage
	}
	rules, err := compileRules(cfg.Rules)
	if err != nil {
		fmt.Fprintf(stderr, "audit-controller: %v\n", err)
		return exitUsage
	}
	logger := setupLogging(cfg.Verbose, stderr)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}

	if cfg.fleet() {
		return runFleet(ctx, cfg, rules, logger, stdout, stderr)
	}

	var cp *controlplane.ControlPlane
	var restCfg *rest.Config
	if demo {
		fmt.Fprintln(stderr, "demo: no cluster configured (or --demo): starting an embedded kube-apiserver + etcd…")
		cp, err = controlplane.Start(ctx, controlplane.Options{})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "demo: the control plane did not start (%v); retrying once\n", err)
			cp, err = controlplane.Start(ctx, controlplane.Options{})
		}
		if err != nil {
			return failed(ctx, stderr, fmt.Errorf("start embedded control plane: %w", err))
		}
		defer cp.Stop()
		restCfg = cp.Config()
		if err := demoPrepare(ctx, cp); err != nil {
			return failed(ctx, stderr, err)
		}
	} else {
		restCfg, err = loadConfig(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "audit-controller: no usable cluster configuration: %v\n", err)
			return exitError
		}
		fmt.Fprintf(stderr, "auditing %s\n", restCfg.Host)
	}

	member, err := joinShardGroup(ctx, cfg, restCfg, demo, stderr)
	if err != nil {
		return failed(ctx, stderr, err)
	}
	a, err := newAudit(restCfg, cfg, rules, logger, stderr, member)
	if err != nil {
		leaveShardGroup(cfg, member, stderr)
		return failed(ctx, stderr, err)
	}
	if err := a.setup(ctx); err != nil {
		leaveShardGroup(cfg, member, stderr)
		_ = a.stop()
		fmt.Fprintf(stderr, "audit-controller: %v\n", err)
		var ue *usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitError
	}
	if cfg.MetricsAddr != "" {
		addr, err := a.metrics.serve(ctx, cfg.MetricsAddr)
		if err != nil {
			leaveShardGroup(cfg, member, stderr)
			_ = a.stop()
			fmt.Fprintf(stderr, "audit-controller: --metrics-addr: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "metrics: serving /metrics and /healthz on http://%s\n", addr)
	}
	// The informers run until a.stop, not until ctx ends: with
	// --shard-group they must hold this replica's objects until the others
	// do (leaveShardGroup).
	a.start(context.WithoutCancel(ctx))

	code := exitOK
	if demo {
		if err := runDemo(ctx, cp, a, stdout, stderr); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "audit-controller: demo: %v\n", err)
			code = exitError
		}
	} else {
		<-ctx.Done()
	}
	leaveShardGroup(cfg, member, stderr)
	if err := a.stop(); err != nil {
		fmt.Fprintf(stderr, "audit-controller: shutdown: %v\n", err)
		code = exitError
	}
	if !demo {
		r, _ := a.auditor.snapshot()
		fmt.Fprint(stdout, r.String())
	}
	return code
}

// joinShardGroup joins --shard-group (nil without it).
func joinShardGroup(ctx context.Context, cfg *Config, restCfg *rest.Config, demo bool, stderr io.Writer) (*membership.Member, error) {
	if cfg.ShardGroup == "" {
		return nil, nil
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	m, err := joinGroup(ctx, cfg, kube, demo)
	if err != nil {
		return nil, err
	}
	s, _ := m.Current()
	fmt.Fprintf(stderr, "shard group %s (Leases in %s): joined as %s, members %v, holding %.1f%% of the keyspace\n",
		cfg.ShardGroup, cfg.ShardNamespace, m.Identity(), m.Members(), 100*s.Size())
	return m, nil
}

// leaveShardGroup leaves the group gracefully, while the informers still
// run: the others take this replica's objects over before it lets them
// go. It waits at most 2 × --shard-lease-duration and 10 s more.
func leaveShardGroup(cfg *Config, m *membership.Member, stderr io.Writer) {
	if m == nil {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*cfg.ShardLeaseDuration+10*time.Second)
	defer cancel()
	if err := m.Leave(ctx); err != nil {
		fmt.Fprintf(stderr, "shard group %s: left without a clean hand-over after %s: %v\n", cfg.ShardGroup, time.Since(start).Round(time.Millisecond), err)
		return
	}
	fmt.Fprintf(stderr, "shard group %s: left after %s\n", cfg.ShardGroup, time.Since(start).Round(time.Millisecond))
}

// loadConfig loads the client configuration as kubectl does.
func loadConfig(c *Config) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
}

func failed(ctx context.Context, stderr io.Writer, err error) int {
	if ctx.Err() != nil {
		return exitOK // interrupted while starting: a normal end
	}
	fmt.Fprintf(stderr, "audit-controller: %v\n", err)
	return exitError
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// setupLogging routes klog (client-go's and, in demo mode, the embedded
// API server's logging) to stderr with --verbose and discards it
// otherwise; the library gets the same logger. klog is process-global:
// only the first call configures it (a later call, e.g. a second run in
// one test process while an API server logs, must not rewrite it).
func setupLogging(verbose bool, stderr io.Writer) logr.Logger {
	loggingOnce.Do(func() { klogLogger = configureKlog(verbose, stderr) })
	return klogLogger
}

var (
	loggingOnce sync.Once
	klogLogger  logr.Logger // set once by setupLogging
)

func configureKlog(verbose bool, stderr io.Writer) logr.Logger {
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
