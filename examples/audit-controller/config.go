package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
)

// Exit codes (documented in README.md).
const (
	exitOK    = 0 // normal end: demo done, --duration elapsed, SIGINT/SIGTERM
	exitError = 1 // runtime failure: cannot reach the cluster, control plane failed, ...
	exitUsage = 2 // bad flags or rules, unknown resource, a CEL expression that does not compile
)

// usageError marks errors that exit with exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// RuleSpec is one CEL rule: Expression must evaluate to true for a
// compliant object; the object is the variable `object`.
type RuleSpec struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
	Message    string `json:"message,omitempty"`
}

// Rules is what an object is checked against. In a --rules file it is
// YAML (or JSON) with these keys; flags add to it.
type Rules struct {
	RequiredLabels      []string   `json:"requiredLabels,omitempty"`
	RequiredAnnotations []string   `json:"requiredAnnotations,omitempty"`
	CEL                 []RuleSpec `json:"rules,omitempty"`
}

// Config is everything the auditor is told.
type Config struct {
	Kubeconfig string
	Context    string
	Demo       bool
	// Contexts (--context a,b or repeated) and AllContexts
	// (--all-contexts) audit a fleet: those contexts of one kubeconfig
	// (fleetaudit.go). One context is Context.
	Contexts    []string
	AllContexts bool

	// What to audit: names (kubectl-style) and/or every resource of some
	// groups or categories, following CRDs as they come and go.
	Resources  []string
	Groups     []string
	Categories []string
	Namespaces []string

	Rules     Rules
	RulesFile string

	SummaryNamespace string
	SummaryName      string
	SummaryInterval  time.Duration

	// Sharding: --shard i/n, or --shard-group (Lease membership).
	Shard              string
	ShardGroup         string
	ShardNamespace     string
	ShardIdentity      string
	ShardLeaseDuration time.Duration
	shard              shard.Shard // parsed --shard

	Workers     int
	MetricsAddr string
	Duration    time.Duration
	// CacheDir (--cache-dir) keeps the informers' caches on disk so that a
	// restart does not list again; CacheSecrets lets it keep Secrets.
	CacheDir     string
	CacheSecrets bool
	Verbose      bool
	Help         bool
}

const helpText = `audit-controller checks Kubernetes objects against rules and reports
violations as Events on the objects, a summary ConfigMap and Prometheus
metrics. Resources are chosen at run time; CRDs installed later are
followed with --category/--group.

With no cluster configured (no --kubeconfig/--context, KUBECONFIG unset,
not in a pod, no ~/.kube/config) or with --demo it runs a demo against an
embedded kube-apiserver and exits 0.

Exit codes: 0 done, 1 runtime failure, 2 bad flags or rules.

Flags:
`

func parseArgs(args []string, stdout io.Writer) (*Config, error) {
	c := &Config{}
	fs := pflag.NewFlagSet("audit-controller", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: kubectl's loading rules)")
	var contexts []string
	fs.StringSliceVar(&contexts, "context", nil, "kubeconfig context; repeatable or comma-separated: several contexts are audited as one fleet (findings per cluster, each cluster's Events and summary ConfigMap in that cluster)")
	fs.BoolVar(&c.AllContexts, "all-contexts", false, "audit every context of the kubeconfig as one fleet")
	fs.BoolVar(&c.Demo, "demo", false, "run the demo on an embedded API server")
	fs.StringSliceVarP(&c.Resources, "resource", "r", nil, "resource to audit, as kubectl names it (repeatable)")
	fs.StringSliceVar(&c.Groups, "group", nil, "audit every resource of these API groups (repeatable)")
	fs.StringSliceVar(&c.Categories, "category", nil, "audit every resource in these categories (repeatable)")
	fs.StringSliceVarP(&c.Namespaces, "namespace", "n", nil, "only these namespaces (default: all)")
	fs.StringSliceVar(&c.Rules.RequiredLabels, "require-label", nil, "label every object must carry (repeatable)")
	fs.StringSliceVar(&c.Rules.RequiredAnnotations, "require-annotation", nil, "annotation every object must carry (repeatable)")
	var celFlags []string
	fs.StringArrayVar(&celFlags, "rule", nil, "CEL rule NAME=EXPRESSION, true when compliant; the object is `object` (repeatable)")
	fs.StringVar(&c.RulesFile, "rules", "", "YAML file with requiredLabels, requiredAnnotations and rules (name, expression, message)")
	fs.StringVar(&c.SummaryNamespace, "summary-namespace", "default", "namespace of the summary ConfigMap")
	fs.StringVar(&c.SummaryName, "summary-name", "audit-summary", "name of the summary ConfigMap")
	fs.DurationVar(&c.SummaryInterval, "summary-interval", 2*time.Second, "how often the summary is written when it changed")
	fs.StringVar(&c.Shard, "shard", "", "audit only replica i of n static shards of every resource (i/n, e.g. 0/3), split by a hash of the object's UID")
	fs.StringVar(&c.ShardGroup, "shard-group", "", "share the objects with the other replicas of this group, agreed on Leases in --shard-namespace (exclusive with --shard)")
	fs.StringVar(&c.ShardNamespace, "shard-namespace", "", "with --shard-group: namespace of the group's Leases (default: the kubeconfig context's or the pod's namespace, else \"default\")")
	fs.StringVar(&c.ShardIdentity, "shard-identity", "", "with --shard-group: this replica's unique name in the group (default: host name and process id)")
	fs.DurationVar(&c.ShardLeaseDuration, "shard-lease-duration", membership.DefaultLeaseDuration, "with --shard-group: a replica not renewing its Lease for this long is dead; the others take its objects")
	fs.IntVar(&c.Workers, "workers", 2, "reconcile workers")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "serve /metrics on this address (e.g. :9090)")
	fs.DurationVar(&c.Duration, "duration", 0, "exit 0 after this long (default: until SIGINT/SIGTERM; demo: until done)")
	fs.StringVar(&c.CacheDir, "cache-dir", "", "keep every informer's cache in this directory and restore it at the next start: a restart resumes the watches instead of listing (one process per directory)")
	fs.BoolVar(&c.CacheSecrets, "cache-secrets", false, "with --cache-dir: keep Secrets on disk too (never without it; files are not encrypted)")
	fs.BoolVarP(&c.Verbose, "verbose", "v", false, "log client-go's and the library's messages to stderr")
	fs.BoolVarP(&c.Help, "help", "h", false, "this help")
	if err := fs.Parse(args); err != nil {
		return nil, usagef("%v", err)
	}
	if c.Help {
		fmt.Fprint(stdout, helpText+fs.FlagUsages())
		return c, nil
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q", fs.Args())
	}
	if c.RulesFile != "" {
		data, err := os.ReadFile(c.RulesFile)
		if err != nil {
			return nil, usagef("--rules: %v", err)
		}
		var fileRules Rules
		if err := yaml.UnmarshalStrict(data, &fileRules); err != nil {
			return nil, usagef("--rules %s: %v", c.RulesFile, err)
		}
		c.Rules.RequiredLabels = append(fileRules.RequiredLabels, c.Rules.RequiredLabels...)
		c.Rules.RequiredAnnotations = append(fileRules.RequiredAnnotations, c.Rules.RequiredAnnotations...)
		c.Rules.CEL = append(fileRules.CEL, c.Rules.CEL...)
	}
	for _, f := range celFlags {
		name, expr, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(expr) == "" {
			return nil, usagef("--rule %q: want NAME=EXPRESSION", f)
		}
		c.Rules.CEL = append(c.Rules.CEL, RuleSpec{Name: strings.TrimSpace(name), Expression: expr})
	}
	seen := map[string]bool{}
	for _, name := range contexts {
		if name = strings.TrimSpace(name); name != "" && !seen[name] {
			seen[name] = true
			c.Contexts = append(c.Contexts, name)
		}
	}
	if len(c.Contexts) == 1 {
		c.Context, c.Contexts = c.Contexts[0], nil
	}
	if c.Demo && (c.Kubeconfig != "" || c.Context != "" || c.fleet()) {
		return nil, usagef("--demo cannot be combined with --kubeconfig, --context or --all-contexts")
	}
	if err := validateFleet(c); err != nil {
		return nil, err
	}
	if c.Workers < 1 {
		return nil, usagef("--workers must be at least 1")
	}
	if c.SummaryInterval <= 0 {
		return nil, usagef("--summary-interval must be positive")
	}
	if c.CacheSecrets && c.CacheDir == "" {
		return nil, usagef("--cache-secrets needs --cache-dir")
	}
	if err := validateShard(c, fs.Changed("summary-name")); err != nil {
		return nil, err
	}
	return c, nil
}

// validate checks what a run needs (the demo fills in its defaults first).
func (c *Config) validate() error {
	if len(c.Resources) == 0 && len(c.Groups) == 0 && len(c.Categories) == 0 {
		return usagef("nothing to audit: give --resource, --group or --category")
	}
	r := c.Rules
	if len(r.RequiredLabels)+len(r.RequiredAnnotations)+len(r.CEL) == 0 {
		return usagef("no rules: give --require-label, --require-annotation, --rule or --rules")
	}
	return nil
}

// noCluster reports whether no cluster is configured, as the crd-watcher
// decides it: no --kubeconfig/--context, KUBECONFIG empty, not in a pod,
// no ~/.kube/config.
func noCluster(c *Config, getenv func(string) string, exists func(string) bool) bool {
	if c.Demo {
		return true
	}
	if c.Kubeconfig != "" || c.Context != "" || c.fleet() || getenv("KUBECONFIG") != "" {
		return false
	}
	if getenv("KUBERNETES_SERVICE_HOST") != "" && getenv("KUBERNETES_SERVICE_PORT") != "" {
		return false
	}
	home := getenv("HOME")
	return home == "" || !exists(home+"/.kube/config")
}

// jsonString renders v for the summary.
func jsonString(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%q", errors.New("cannot encode: "+err.Error()).Error())
	}
	return b.String()
}
