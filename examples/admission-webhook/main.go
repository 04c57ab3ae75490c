// Command admission-webhook is a validating admission webhook whose
// policies are data: YAML files of CEL validations (Kubernetes' own CEL
// environment for admission) that can look up other objects in
// informerkit caches. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// flags are the command line.
type flags struct {
	kubeconfig, context string
	demo                bool
	policyDir           string
	certFile, keyFile   string
	listen, probeListen string
	install             bool
	webhookURL          string
	service             string
	caFile              string
	liveLookups         bool
	verbose             int
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("admission-webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: kubectl's rules: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&f.context, "context", "", "kubeconfig context")
	fs.BoolVar(&f.demo, "demo", false, "start an API server in this process, install the shipped policies and show them deciding (the default when no cluster is configured)")
	fs.StringVar(&f.policyDir, "policies", "", "directory of policy files (*.yaml); reloaded when a file changes")
	fs.StringVar(&f.certFile, "tls-cert-file", "", "serving certificate (PEM), reloaded from disk when it changes")
	fs.StringVar(&f.keyFile, "tls-private-key-file", "", "serving certificate's key (PEM)")
	fs.StringVar(&f.listen, "listen", ":8443", "HTTPS address of the webhook")
	fs.StringVar(&f.probeListen, "probe-listen", ":8081", "HTTP address of /healthz, /readyz, /metrics and /policies")
	fs.BoolVar(&f.install, "install", false, "write the ValidatingWebhookConfiguration for the loaded policies, at start and after each reload")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "with --install: the URL the API server calls (https://host:port)")
	fs.StringVar(&f.service, "service", "", "with --install: the Service the API server calls (namespace/name, port 443)")
	fs.StringVar(&f.caFile, "ca-file", "", "with --install: the CA certificate (PEM) that signed the serving certificate (the caBundle)")
	fs.BoolVar(&f.liveLookups, "live-lookups", false, "send a GET or LIST to the API server for every lookup instead of reading the caches (for comparison only)")
	fs.IntVar(&f.verbose, "v", 0, "log verbosity (1: every decision)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return f, nil
}

func newLogger(stderr io.Writer, verbosity int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		if prefix != "" {
			fmt.Fprintf(stderr, "%s: %s\n", prefix, args)
			return
		}
		fmt.Fprintln(stderr, args)
	}, funcr.Options{Verbosity: verbosity, LogTimestamp: true})
}

// clusterConfigured applies the crd-watcher's no-cluster rule: no
// --kubeconfig or --context, KUBECONFIG empty, not in a pod, and no
// ~/.kube/config.
func clusterConfigured(f *flags) bool {
	if f.kubeconfig != "" || f.context != "" || os.Getenv("KUBECONFIG") != "" {
		return true
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != "" {
		return true
	}
	if home := os.Getenv("HOME"); home != "" {
		if _, err := os.Stat(home + "/.kube/config"); err == nil {
			return true
		}
	}
	return false
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	log := newLogger(stderr, f.verbose)
	if f.demo || !clusterConfigured(f) {
		if err := runDemo(ctx, f, stdout, log); err != nil {
			fmt.Fprintln(stderr, "demo:", err)
			return exitError
		}
		return exitOK
	}
	if f.policyDir == "" || f.certFile == "" || f.keyFile == "" {
		fmt.Fprintln(stderr, "--policies, --tls-cert-file and --tls-private-key-file are required with a cluster")
		return exitUsage
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		fmt.Fprintln(stderr, "cluster configuration:", err)
		return exitError
	}
	opts := serverOptions{PolicyDir: f.policyDir, CertFile: f.certFile, KeyFile: f.keyFile, Listen: f.listen, ProbeListen: f.probeListen,
		LiveLookups: f.liveLookups, Log: log}
	if f.install {
		t, err := installTarget(f)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitUsage
		}
		opts.Install = t
	}
	return serve(ctx, cfg, opts, stderr)
}

// installTarget reads --webhook-url or --service, and --ca-file.
func installTarget(f *flags) (*webhookTarget, error) {
	if (f.webhookURL == "") == (f.service == "") {
		return nil, errors.New("--install needs one of --webhook-url and --service")
	}
	if f.caFile == "" {
		return nil, errors.New("--install needs --ca-file (the caBundle)")
	}
	ca, err := os.ReadFile(f.caFile)
	if err != nil {
		return nil, err
	}
	t := &webhookTarget{URL: f.webhookURL, CABundle: ca}
	if f.service != "" {
		ns, name, ok := strings.Cut(f.service, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--service %q: want namespace/name", f.service)
		}
		t.ServiceNamespace, t.ServiceName = ns, name
	}
	return t, nil
}

// serve runs the webhook until ctx ends.
func serve(ctx context.Context, cfg *rest.Config, opts serverOptions, stderr io.Writer) int {
	s, err := newServer(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	opts.Log.Info("serving", "webhook", "https://"+s.webhookAddr()+validatePathPrefix+"<policy>", "probes", "http://"+s.probeAddr())
	<-ctx.Done()
	s.shutdown()
	return exitOK
}
