package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
)

// Exit codes (documented in README.md).
const (
	exitOK      = 0 // normal end: demo done, --duration elapsed, SIGINT/SIGTERM
	exitError   = 1 // runtime failure: cannot reach the cluster, control plane failed, ...
	exitUsage   = 2 // bad flags or config file, unknown or ambiguous resource, nothing to watch
	exitFailure = 3 // --exit-on-failure: an informer failed or the API server went away while watching
)

// defaultRequestTimeout is the --request-timeout default: long enough for a
// loaded API server, short enough that a server that accepts connections
// and never answers is reported within seconds.
const defaultRequestTimeout = 10 * time.Second

// usageError marks errors that exit with exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// ResourceSpec is one resource to watch: a kubectl-style name plus optional
// per-resource overrides of the global namespace and selector settings.
// In a config file it is either a plain string or an object.
type ResourceSpec struct {
	Name          string
	Namespaces    []string
	LabelSelector string
	FieldSelector string
}

// Config is everything the watcher is told, from flags and the optional
// config file (flags given on the command line win over the file). The
// config file's keys are in configfile.go.
type Config struct {
	// Where.
	Kubeconfig string
	Context    string
	// Contexts (--context given several, --context a,b) and AllContexts
	// (--all-contexts) watch a fleet: one cache over those contexts of the
	// kubeconfig (fleetwatch.go). One context is Context, as before.
	Contexts       []string
	AllContexts    bool
	Demo           bool
	RequestTimeout time.Duration

	// What.
	Resources     []ResourceSpec
	All           bool
	Groups        []string
	Categories    []string
	Namespaces    []string
	LabelSelector string
	FieldSelector string
	WaitForCRDs   bool
	Shard         string // --shard i/n; "" holds everything

	// Dynamic sharding (--shard-group): replicas agree on Leases.
	ShardGroup         string
	ShardNamespace     string // "" until defaultShardNamespace fills it in
	ShardIdentity      string // "" until membership.DefaultIdentity() fills it in
	ShardLeaseDuration time.Duration

	// How.
	Output        string // "text", "json", "table" or "wide"
	ShowObject    bool
	IgnorePaths   []string // --ignore-paths: field paths whose changes the diff does not show
	MetricsAddr   string
	Duration      time.Duration
	Progress      time.Duration
	ExitOnFailure bool
	AccessCheck   bool
	Verbose       bool
	// PermittedNamespaces: every namespace the user may list and watch
	// each resource in (--namespace: the candidates, for a user who may
	// not list namespaces).
	PermittedNamespaces bool
	// CacheDir (--cache-dir) keeps the informers' caches on disk, so that
	// a restart prints only what changed while the watcher was down;
	// CacheSecrets lets it keep Secrets too.
	CacheDir     string
	CacheSecrets bool

	// Set by parseArgs, not by the file.
	ConfigFile    string
	Help          bool
	resourceFlags []string // --resource values
	contextFlags  []string // --context values
}

// flagSet declares every flag. The README and the --help test are checked
// against it.
func newFlagSet(c *Config, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("crd-watcher", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.SortFlags = false
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "path to a kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster config)")
	fs.StringSliceVar(&c.contextFlags, "context", nil, "kubeconfig context to use (default: the current context); repeatable or comma-separated: several contexts are watched as one fleet, every line and record naming its context (CLUSTER column, \"cluster\" in -o json)")
	fs.BoolVar(&c.AllContexts, "all-contexts", false, "watch every context of the kubeconfig as one fleet (as --context with all of them)")
	fs.BoolVar(&c.Demo, "demo", false, "run the demo: start an embedded kube-apiserver + etcd, install sample CRDs and drive a short workload (the default when no cluster is configured)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", defaultRequestTimeout, "how long the watcher waits for the API server to answer a request (connecting, discovery, the contact check) before it reports the server unreachable")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file listing resources and options (flags given on the command line override it)")
	fs.StringArrayVarP(&c.resourceFlags, "resource", "r", nil, "resource to watch, as kubectl names it (ct, deployments.apps, crontabs.v1.stable.example.com); repeatable")
	fs.BoolVar(&c.All, "all", false, "watch every listable+watchable resource matching --group/--category, following resources as they appear and vanish")
	fs.StringSliceVar(&c.Groups, "group", nil, "with --all: only these API groups (\"\" or \"core\" for the core group); repeatable or comma-separated")
	fs.StringSliceVar(&c.Categories, "category", nil, "with --all: only resources in one of these categories (as in kubectl get all); repeatable or comma-separated")
	fs.StringSliceVarP(&c.Namespaces, "namespace", "n", nil, "only these namespaces (default: all namespaces); repeatable or comma-separated")
	fs.StringVarP(&c.LabelSelector, "selector", "l", "", "label selector (e.g. app=web,tier!=cache)")
	fs.StringVar(&c.FieldSelector, "field-selector", "", "field selector (e.g. metadata.name=foo)")
	fs.StringVar(&c.Shard, "shard", "", "hold only replica i of n static shards of every resource (i/n, e.g. 0/3): objects are split by a hash of their UID")
	fs.StringVar(&c.ShardGroup, "shard-group", "", "share every resource with the other replicas of this shard group: replicas hold a Lease each (in --shard-namespace) and divide the objects by consistent hashing of their UID, following replicas that join and leave (exclusive with --shard)")
	fs.StringVar(&c.ShardNamespace, "shard-namespace", "", "with --shard-group: the namespace of the group's Leases (default: the namespace of the kubeconfig context, or in a pod its own namespace, else \"default\")")
	fs.StringVar(&c.ShardIdentity, "shard-identity", "", "with --shard-group: this replica's name in the group, unique among live replicas (default: host name and process id)")
	fs.DurationVar(&c.ShardLeaseDuration, "shard-lease-duration", membership.DefaultLeaseDuration, "with --shard-group: a replica that has not renewed its Lease for this long is dead and its objects go to the others (renewed every third of it)")
	fs.BoolVar(&c.WaitForCRDs, "wait-for-crds", false, "wait for resources that are not served yet instead of failing; such resources must be named resource.version.group")
	fs.StringVarP(&c.Output, "output", "o", "text", "output format: text (human-readable), json (one object per line), table (the columns kubectl get shows, from the server) or wide (table with kubectl's -o wide columns)")
	fs.BoolVar(&c.ShowObject, "show-object", false, "with -o json: include the full object in each event")
	fs.Var(&pathsValue{paths: &c.IgnorePaths}, "ignore-paths", "field paths whose changes updates do not show, as the diff prints them (status, metadata.labels, spec.template, status.conditions[type=\"Ready\"]); an update that changed only those prints one short line; repeatable or comma-separated (default: none)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on /metrics and probes on /healthz and /readyz at this address (e.g. :9090, 127.0.0.1:0)")
	fs.DurationVar(&c.Duration, "duration", 0, "exit 0 after this long (0: run until SIGINT/SIGTERM; in demo mode: until the demo workload is done)")
	fs.DurationVar(&c.Progress, "progress-interval", time.Second, "how often to print cache sync progress to stderr until every cache has synced (0: never)")
	fs.BoolVar(&c.ExitOnFailure, "exit-on-failure", false, "exit 3 when an informer fails (forbidden, unauthorized, rejected selector, ...) or the API server cannot be reached, instead of waiting for it to recover")
	fs.BoolVar(&c.AccessCheck, "access-check", true, "before listing a resource, ask the API server whether list and watch are allowed (a SelfSubjectRulesReview per namespace and one for all namespaces, each answering for every resource; SelfSubjectAccessReviews where a rules review cannot answer); a resource that is not is Failed naming the missing verbs and namespaces, and is re-checked until access is granted (--access-check=false: find out from the list's 403)")
	fs.BoolVar(&c.PermittedNamespaces, "permitted-namespaces", false, "watch each resource in exactly the namespaces where the user may list and watch it, following RBAC while running (--namespace: the candidates, for a user who may not list namespaces); STATUS lines and /readyz name the namespaces permitted and not, with the missing verbs")
	fs.StringVar(&c.CacheDir, "cache-dir", "", "keep every informer's cache in this directory (created 0700, files 0600) and restore it at the next start: a restart does not print the objects again, only what changed while the watcher was down (no list is sent if the server still has the history); one watcher per directory")
	fs.BoolVar(&c.CacheSecrets, "cache-secrets", false, "with --cache-dir: keep Secrets on disk too (never without it; the files are not encrypted)")
	fs.BoolVarP(&c.Verbose, "verbose", "v", false, "log the library's and (in demo mode) the embedded control plane's messages to stderr")
	fs.BoolVarP(&c.Help, "help", "h", false, "show this help")
	return fs
}

// pathsValue is the --ignore-paths flag: repeatable, and comma-separated
// except at commas in brackets or quotes (metadata.annotations["a,b"]);
// quotes are taken as given (status.conditions[type="Ready"]), not as CSV.
// An empty value sets no paths.
type pathsValue struct {
	paths *[]string
	set   bool
}

func (v *pathsValue) String() string {
	if v.paths == nil || len(*v.paths) == 0 {
		return ""
	}
	return "[" + strings.Join(*v.paths, ",") + "]"
}

func (v *pathsValue) Set(s string) error {
	var parts []string
	if s != "" {
		parts = splitPaths(s)
	}
	if !v.set {
		*v.paths = nil
	}
	*v.paths = append(*v.paths, parts...)
	v.set = true
	return nil
}

func (v *pathsValue) Type() string { return "strings" }

func usageText(fs *pflag.FlagSet) string {
	return `crd-watcher watches Kubernetes resources (built-in kinds and CRDs) with
informerkit's shared informers and prints every change.

Usage:
  crd-watcher --resource deploy --resource ct -n default
  crd-watcher --all --category all -o json
  crd-watcher --resource ct --resource deploy -o wide
  crd-watcher --config watch.yaml
  crd-watcher                              # no cluster configured: demo mode

Events go to stdout, one line (or JSON object) each; STATUS lines,
progress and logs go to stderr.

Where: --kubeconfig, --context, $KUBECONFIG, ~/.kube/config and in-cluster
config follow kubectl's loading rules. With none of them (no --kubeconfig,
KUBECONFIG unset, not in a pod, ~/.kube/config absent), or with --demo, it
runs the demo against an embedded API server.

Exit codes: 0 done or interrupted, 1 runtime error (cannot reach or use the
cluster), 2 usage error (bad flag or config, unknown or ambiguous resource,
nothing to watch), 3 with --exit-on-failure: an informer failed or the API
server went away.
` + groupedUsages(fs)
}

// flagGroups orders --help: each flag of newFlagSet belongs to exactly one
// group (TestHelpGroupsEveryFlag); one in none would be listed under
// "Other flags".
var flagGroups = []struct {
	title string
	names []string
}{
	{"Cluster", []string{"kubeconfig", "context", "all-contexts", "demo", "request-timeout", "config"}},
	{"Resources to watch", []string{"resource", "all", "group", "category", "wait-for-crds"}},
	{"Namespaces, selectors and shards", []string{"namespace", "permitted-namespaces", "selector", "field-selector", "shard", "shard-group", "shard-namespace", "shard-identity", "shard-lease-duration"}},
	{"Output", []string{"output", "show-object", "ignore-paths", "progress-interval", "verbose"}},
	{"Access, restarts and operation", []string{"access-check", "cache-dir", "cache-secrets", "exit-on-failure", "metrics-addr", "duration", "help"}},
}

// groupedUsages is fs's flag list under the headings of flagGroups.
func groupedUsages(fs *pflag.FlagSet) string {
	var b strings.Builder
	grouped := map[string]bool{}
	section := func(title string, flags []*pflag.Flag) {
		if len(flags) == 0 {
			return
		}
		gs := pflag.NewFlagSet(title, pflag.ContinueOnError)
		gs.SortFlags = false
		for _, f := range flags {
			gs.AddFlag(f)
		}
		fmt.Fprintf(&b, "\n%s:\n%s", title, gs.FlagUsages())
	}
	for _, g := range flagGroups {
		var flags []*pflag.Flag
		for _, n := range g.names {
			if f := fs.Lookup(n); f != nil {
				flags = append(flags, f)
				grouped[n] = true
			}
		}
		section(g.title, flags)
	}
	var rest []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if !grouped[f.Name] {
			rest = append(rest, f)
		}
	})
	section("Other flags", rest)
	return b.String()
}

// parseArgs parses the command line and the config file it names.
func parseArgs(args []string, helpOut io.Writer) (*Config, error) {
	c := &Config{}
	fs := newFlagSet(c, io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			c.Help = true
			fmt.Fprint(helpOut, usageText(fs))
			return c, nil
		}
		return nil, &usageError{err}
	}
	if c.Help {
		fmt.Fprint(helpOut, usageText(fs))
		return c, nil
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q (name resources with --resource)", fs.Args())
	}
	if c.ConfigFile != "" {
		data, err := os.ReadFile(c.ConfigFile)
		if err != nil {
			return nil, usagef("config file: %v", err)
		}
		fileCfg, set, err := parseConfigFile(c.ConfigFile, data)
		if err != nil {
			return nil, usagef("config file %v", err)
		}
		mergeConfig(c, fileCfg, set, fs.Changed)
	}
	if fs.Changed("context") {
		c.Context, c.Contexts = "", nil
		seen := map[string]bool{}
		for _, name := range c.contextFlags {
			if name = strings.TrimSpace(name); name != "" && !seen[name] {
				seen[name] = true
				c.Contexts = append(c.Contexts, name)
			}
		}
		if len(c.Contexts) == 1 {
			c.Context, c.Contexts = c.Contexts[0], nil
		}
	}
	if fs.Changed("resource") {
		c.Resources = nil
		for _, r := range c.resourceFlags {
			for _, name := range strings.Split(r, ",") {
				if name = strings.TrimSpace(name); name != "" {
					c.Resources = append(c.Resources, ResourceSpec{Name: name})
				}
			}
		}
	}
	return c, validate(c)
}

// fileKeyFlags maps each config file key to the flag that overrides it.
var fileKeyFlags = map[string]string{
	"kubeconfig": "kubeconfig", "context": "context", "demo": "demo", "resources": "resource",
	"all": "all", "groups": "group", "categories": "category", "namespaces": "namespace",
	"labelSelector": "selector", "fieldSelector": "field-selector", "waitForCRDs": "wait-for-crds",
	"output": "output", "showObject": "show-object", "ignorePaths": "ignore-paths", "metricsAddr": "metrics-addr", "duration": "duration",
	"requestTimeout": "request-timeout", "exitOnFailure": "exit-on-failure", "verbose": "verbose",
	"accessCheck": "access-check", "shard": "shard", "shardGroup": "shard-group", "shardNamespace": "shard-namespace",
	"shardIdentity": "shard-identity", "shardLeaseDuration": "shard-lease-duration",
	"cacheDir": "cache-dir", "cacheSecrets": "cache-secrets",
}

// mergeConfig copies the settings the file set into c where the flag was
// not given. Resources given with --resource replace the file's list.
func mergeConfig(c, file *Config, set map[string]bool, changed func(string) bool) {
	for key := range set {
		if changed(fileKeyFlags[key]) {
			continue
		}
		src, dst := fileKeys[key].set(file), fileKeys[key].set(c)
		switch d := dst.(type) {
		case *string:
			*d = *src.(*string)
		case *bool:
			*d = *src.(*bool)
		case *time.Duration:
			*d = *src.(*time.Duration)
		case *[]string:
			*d = *src.(*[]string)
		case *[]ResourceSpec:
			*d = *src.(*[]ResourceSpec)
		}
	}
}

func validate(c *Config) error {
	switch c.Output {
	case "text", "json", "table", "wide":
	default:
		return usagef("--output must be text, json, table or wide, not %q", c.Output)
	}
	if c.All && len(c.Resources) > 0 {
		return usagef("--all and --resource are mutually exclusive")
	}
	if !c.All && (len(c.Groups) > 0 || len(c.Categories) > 0) {
		return usagef("--group and --category need --all")
	}
	if c.Demo && (c.Kubeconfig != "" || c.Context != "" || c.fleet()) {
		return usagef("--demo runs its own API server; it cannot be combined with --kubeconfig, --context or --all-contexts")
	}
	if err := validateFleet(c); err != nil {
		return err
	}
	if c.ShowObject && c.Output != "json" {
		return usagef("--show-object needs -o json")
	}
	if c.Duration < 0 {
		return usagef("--duration must not be negative")
	}
	if c.RequestTimeout <= 0 {
		return usagef("--request-timeout must be positive")
	}
	if c.Progress < 0 {
		return usagef("--progress-interval must not be negative (0 turns progress off)")
	}
	if c.MetricsAddr != "" {
		if err := checkListenAddr(c.MetricsAddr); err != nil {
			return usagef("--metrics-addr %q: %v", c.MetricsAddr, err)
		}
	}
	if err := checkSelectors(c.LabelSelector, c.FieldSelector); err != nil {
		return err
	}
	if err := checkNamespaces("-n", c.Namespaces); err != nil {
		return err
	}
	for i, p := range c.IgnorePaths {
		canonical, err := canonicalPath(strings.TrimSpace(p))
		if err != nil {
			return usagef("--ignore-paths: %q is not a field path as the diff prints them: %v (forms: %s)", p, err, fieldPathForms)
		}
		c.IgnorePaths[i] = canonical
	}
	if c.Shard != "" {
		if _, err := shard.ParseStatic(c.Shard); err != nil {
			return usagef("--shard: %v", err)
		}
	}
	if err := validateShardGroup(c); err != nil {
		return err
	}
	if c.CacheSecrets && c.CacheDir == "" {
		return usagef("--cache-secrets needs --cache-dir")
	}
	if c.PermittedNamespaces && c.ShardGroup != "" {
		return usagef("--permitted-namespaces and --shard-group are mutually exclusive")
	}
	for i, g := range c.Groups {
		if g == "core" {
			c.Groups[i] = ""
		}
	}
	for _, r := range c.Resources {
		if r.Name == "" {
			return usagef("a resource without a name")
		}
		if strings.Contains(r.Name, "/") {
			return usagef("%q: subresources cannot be watched", r.Name)
		}
		if strings.IndexFunc(r.Name, unicode.IsSpace) >= 0 {
			return usagef("resource %q: a resource name has no spaces (name several with --resource a,b or one per list item)", r.Name)
		}
		if err := checkSelectors(r.LabelSelector, r.FieldSelector); err != nil {
			return fmt.Errorf("resource %q: %w", r.Name, err)
		}
		if err := checkNamespaces("namespaces of resource "+strconv.Quote(r.Name), r.Namespaces); err != nil {
			return err
		}
	}
	return nil
}

// checkListenAddr checks an address to listen on before anything else
// happens (the listener itself is opened before the API server is
// contacted): host:port or :port, the port a number, the host an IP
// address or a host name.
func checkListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port or :port, e.g. :9090 or 127.0.0.1:0")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if host != "" && net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		return fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return nil
}

// checkNamespaces checks namespace names (DNS labels) before the server
// is asked for them ("" is all namespaces, as before).
func checkNamespaces(what string, namespaces []string) error {
	for _, ns := range namespaces {
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return usagef("%s: %q is not a namespace name: %s", what, ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

// noCluster is the rule that selects demo mode when --demo is not given:
// no --kubeconfig, no KUBECONFIG, no in-cluster environment and no
// ~/.kube/config. getenv and exists are parameters so that the rule can be
// tested without touching the real environment.
func noCluster(c *Config, getenv func(string) string, exists func(string) bool) bool {
	if c.Demo {
		return true
	}
	if c.Kubeconfig != "" || c.Context != "" || c.fleet() {
		return false
	}
	if getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		return false
	}
	if getenv("KUBERNETES_SERVICE_HOST") != "" && getenv("KUBERNETES_SERVICE_PORT") != "" {
		return false
	}
	home := getenv("HOME")
	if home == "" {
		return true
	}
	return !exists(home + "/" + clientcmd.RecommendedHomeDir + "/" + clientcmd.RecommendedFileName)
}

var versionRE = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// parseQualifiedGVR turns "resource.version.group" into a GVR, for resources
// that are not served yet (--wait-for-crds): without discovery a name like
// "crontabs.stable.example.com" cannot be told apart from
// "crontabs" at version "stable" of group "example.com", so the version is
// required and must look like a Kubernetes API version.
func parseQualifiedGVR(name string) (schema.GroupVersionResource, bool) {
	parts := strings.SplitN(name, ".", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" || !versionRE.MatchString(parts[1]) {
		return schema.GroupVersionResource{}, false
	}
	if strings.ToLower(parts[0]) != parts[0] {
		return schema.GroupVersionResource{}, false // a plural resource name is lower case; kinds are not accepted here
	}
	return schema.GroupVersionResource{Group: parts[2], Version: parts[1], Resource: parts[0]}, true
}
