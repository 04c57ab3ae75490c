package main

import (
	"context"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
)

// validateShardGroup checks the --shard-group flags: exclusive with
// --shard, namespace and identity only with a group, names the API server
// accepts, and at most one namespace per resource (an informer following a
// group over several namespaces would complete its lists namespace by
// namespace, which the group's hand-over cannot count).
func validateShardGroup(c *Config) error {
	if c.ShardGroup == "" {
		switch {
		case c.ShardNamespace != "":
			return usagef("--shard-namespace needs --shard-group")
		case c.ShardIdentity != "":
			return usagef("--shard-identity needs --shard-group")
		case c.ShardLeaseDuration != membership.DefaultLeaseDuration && c.ShardLeaseDuration != 0:
			return usagef("--shard-lease-duration needs --shard-group")
		}
		return nil
	}
	if c.Shard != "" {
		return usagef("--shard and --shard-group are mutually exclusive: a replica holds a fixed shard (--shard i/n) or a group's share (--shard-group)")
	}
	if errs := validation.IsValidLabelValue(c.ShardGroup); len(errs) > 0 || strings.ToLower(c.ShardGroup) != c.ShardGroup {
		return usagef("--shard-group %q: want a lower-case name of letters, digits and '-' (it names the group's Leases)", c.ShardGroup)
	}
	if c.ShardNamespace != "" {
		if errs := validation.IsDNS1123Label(c.ShardNamespace); len(errs) > 0 {
			return usagef("--shard-namespace %q: %s", c.ShardNamespace, strings.Join(errs, "; "))
		}
	}
	if c.ShardIdentity != "" {
		if errs := validation.IsDNS1123Subdomain(c.ShardGroup + "-" + c.ShardIdentity); len(errs) > 0 {
			return usagef("--shard-identity %q: the Lease name %q is not valid: %s", c.ShardIdentity, c.ShardGroup+"-"+c.ShardIdentity, strings.Join(errs, "; "))
		}
	}
	if c.ShardLeaseDuration < time.Second {
		return usagef("--shard-lease-duration must be at least 1s, not %s", c.ShardLeaseDuration)
	}
	if len(c.Namespaces) > 1 {
		return usagef("--shard-group works with all namespaces or one (-n %s): an informer over several namespaces cannot follow a group", strings.Join(c.Namespaces, ","))
	}
	for _, r := range c.Resources {
		if len(r.Namespaces) > 1 {
			return usagef("--shard-group works with all namespaces or one; resource %q names %d", r.Name, len(r.Namespaces))
		}
	}
	return nil
}

// defaultShardNamespace is where a group's Leases go without
// --shard-namespace: the namespace kubectl would use — the kubeconfig
// context's, or in a pod its own (POD_NAMESPACE, else the service
// account's namespace file) — else "default".
func defaultShardNamespace(c *Config) string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	if ns, _, err := cc.Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// joinGroup joins --shard-group: the returned member is every informer's
// shard source. It fills in the namespace and identity defaults.
func joinGroup(ctx context.Context, c *Config, restCfg *rest.Config, demo bool) (*membership.Member, error) {
	if c.ShardNamespace == "" {
		c.ShardNamespace = "default"
		if !demo {
			c.ShardNamespace = defaultShardNamespace(c)
		}
	}
	if c.ShardIdentity == "" {
		c.ShardIdentity = membership.DefaultIdentity()
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	jctx, cancel := context.WithTimeout(ctx, c.RequestTimeout+c.ShardLeaseDuration)
	defer cancel()
	m, err := membership.Join(jctx, client, membership.Options{
		Namespace: c.ShardNamespace, Group: c.ShardGroup, Identity: c.ShardIdentity, LeaseDuration: c.ShardLeaseDuration,
	})
	if err != nil {
		return nil, fmt.Errorf("joining shard group %q (Leases in namespace %q; the watcher needs get, list, watch, create, update and delete on leases.coordination.k8s.io there, see rbac.yaml): %w",
			c.ShardGroup, c.ShardNamespace, err)
	}
	return m, nil
}

// leaveGroup leaves the group gracefully: the others take this replica's
// objects over before its Lease goes. It waits at most the member's
// hand-over timeout (2 × --shard-lease-duration) plus --request-timeout.
func leaveGroup(c *Config, m *membership.Member, out *printer) {
	start := time.Now()
	out.info("%s SHARD   leaving shard group %s: handing this replica's objects to the others…", start.Format("15:04:05.000"), c.ShardGroup)
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.ShardLeaseDuration+c.RequestTimeout)
	defer cancel()
	if err := m.Leave(ctx); err != nil {
		out.info("%s SHARD   left shard group %s without a clean hand-over after %s: %v", time.Now().Format("15:04:05.000"), c.ShardGroup, roundDuration(time.Since(start)), err)
		return
	}
	out.info("%s SHARD   left shard group %s after %s", time.Now().Format("15:04:05.000"), c.ShardGroup, roundDuration(time.Since(start)))
}

// groupView is what a replica sees of its group at one moment.
type groupView struct {
	Group     string
	Namespace string
	Identity  string
	Members   []string
	Shard     shard.Shard
}

func (v groupView) equal(o groupView) bool {
	return v.Shard.Equal(o.Shard) && slices.Equal(v.Members, o.Members)
}

// String is one human-readable line: who is in the group and how much of
// the keyspace this replica holds.
func (v groupView) String() string {
	return fmt.Sprintf("group %s (Leases in %s): %d members [%s]; this replica %s holds %s of the keyspace in %s",
		v.Group, v.Namespace, len(v.Members), strings.Join(v.Members, " "), v.Identity,
		percent(v.Shard.Size()), plural(len(v.Shard.Ranges()), "range"))
}

// followGroup reports the group as this replica sees it whenever its
// shard or its member list changes, until ctx ends.
func followGroup(ctx context.Context, c *Config, m *membership.Member, report func(groupView)) {
	var last groupView
	first := true
	t := time.NewTicker(time.Second) // members can change without changing this replica's shard
	defer t.Stop()
	for {
		s, changed := m.Current()
		v := groupView{Group: c.ShardGroup, Namespace: c.ShardNamespace, Identity: m.Identity(), Members: m.Members(), Shard: s}
		if first || !v.equal(last) {
			report(v)
			last, first = v, false
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
	}
}

var shardRangeRE = regexp.MustCompile(`shardRange\(\s*([a-z.]+)\s*,\s*'0x([0-9a-f]+)'\s*,\s*'0x([0-9a-f]+)'\s*\)`)

// selectorSummary reads an informer's shard selector (Status.Shard): the
// part of the keyspace it covers (0 to 1), its number of ranges and the
// field it hashes. ok is false for "" (not sharded) or a selector it
// cannot read.
func selectorSummary(sel string) (fraction float64, ranges int, field string, ok bool) {
	if sel == "" {
		return 0, 0, "", false
	}
	space := new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 64))
	total := new(big.Int)
	for _, m := range shardRangeRE.FindAllStringSubmatch(sel, -1) {
		start, ok1 := new(big.Int).SetString(m[2], 16)
		end, ok2 := new(big.Int).SetString(m[3], 16)
		if !ok1 || !ok2 || end.Cmp(start) < 0 {
			return 0, 0, "", false
		}
		total.Add(total, new(big.Int).Sub(end, start))
		field = m[1]
		ranges++
	}
	if ranges == 0 {
		return 0, 0, "", false
	}
	fraction, _ = new(big.Float).Quo(new(big.Float).SetInt(total), space).Float64()
	return fraction, ranges, field, true
}

// shardCell is the status table's SHARD column: "33.3% of uid, 1 range";
// "all" for an informer that is not sharded.
func shardCell(sel string) string {
	f, n, field, ok := selectorSummary(sel)
	if !ok {
		if sel == "" {
			return "all"
		}
		return "?"
	}
	return fmt.Sprintf("%s of %s, %s", percent(f), strings.TrimPrefix(field, "object.metadata."), plural(n, "range"))
}

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
