package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
)

// validateShard checks the sharding flags: --shard i/n, or --shard-group
// with its namespace, identity and lease duration; not both. An informer
// following a group must have one namespace at most. Sharded replicas
// each write their own summary: unless --summary-name is given, it gets
// the shard (i-of-n) or the replica's identity as a suffix (summaryChanged
// says whether it was given).
func validateShard(c *Config, summaryChanged bool) error {
	if c.Shard != "" {
		s, err := shard.ParseStatic(c.Shard)
		if err != nil {
			return usagef("--shard: %v", err)
		}
		c.shard = s
	}
	if c.ShardGroup == "" {
		switch {
		case c.ShardNamespace != "":
			return usagef("--shard-namespace needs --shard-group")
		case c.ShardIdentity != "":
			return usagef("--shard-identity needs --shard-group")
		case c.ShardLeaseDuration != membership.DefaultLeaseDuration:
			return usagef("--shard-lease-duration needs --shard-group")
		}
		if c.Shard != "" && !summaryChanged {
			i, n, _ := strings.Cut(c.Shard, "/")
			c.SummaryName += "-" + strings.TrimSpace(i) + "-of-" + strings.TrimSpace(n)
		}
		return nil
	}
	if c.Shard != "" {
		return usagef("--shard and --shard-group are mutually exclusive")
	}
	if errs := validation.IsValidLabelValue(c.ShardGroup); len(errs) > 0 || strings.ToLower(c.ShardGroup) != c.ShardGroup {
		return usagef("--shard-group %q: want a lower-case name of letters, digits and '-' (it names the group's Leases)", c.ShardGroup)
	}
	if c.ShardNamespace != "" {
		if errs := validation.IsDNS1123Label(c.ShardNamespace); len(errs) > 0 {
			return usagef("--shard-namespace %q: %s", c.ShardNamespace, strings.Join(errs, "; "))
		}
	}
	if c.ShardIdentity == "" {
		c.ShardIdentity = membership.DefaultIdentity()
	}
	if errs := validation.IsDNS1123Subdomain(c.ShardGroup + "-" + c.ShardIdentity); len(errs) > 0 {
		return usagef("--shard-identity %q: the Lease name %q is not valid: %s", c.ShardIdentity, c.ShardGroup+"-"+c.ShardIdentity, strings.Join(errs, "; "))
	}
	if c.ShardLeaseDuration < time.Second {
		return usagef("--shard-lease-duration must be at least 1s, not %s", c.ShardLeaseDuration)
	}
	if len(c.Namespaces) > 1 {
		return usagef("--shard-group works with all namespaces or one, not -n %s", strings.Join(c.Namespaces, ","))
	}
	if !summaryChanged {
		c.SummaryName += "-" + c.ShardIdentity
	}
	return nil
}

// shardNamespace is where the group's Leases go without --shard-namespace:
// the namespace kubectl would use (the context's, or in a pod its own),
// else "default".
func shardNamespace(c *Config) string {
	if c.ShardNamespace != "" {
		return c.ShardNamespace
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	if ns, _, err := cc.Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// shardOptions are the factory-wide options for --shard or --shard-group
// (member non-nil).
func shardOptions(c *Config, member *membership.Member) []dynamicinformer.ResourceOption {
	switch {
	case member != nil:
		return []dynamicinformer.ResourceOption{dynamicinformer.WithShardSource(member)}
	case !c.shard.IsZero():
		return []dynamicinformer.ResourceOption{dynamicinformer.WithShard(c.shard)}
	}
	return nil
}

// joinGroup joins --shard-group (nil, nil without it).
func joinGroup(ctx context.Context, c *Config, kube kubernetes.Interface, demo bool) (*membership.Member, error) {
	if c.ShardGroup == "" {
		return nil, nil
	}
	if c.ShardNamespace == "" {
		c.ShardNamespace = "default"
		if !demo {
			c.ShardNamespace = shardNamespace(c)
		}
	}
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second+c.ShardLeaseDuration)
	defer cancel()
	m, err := membership.Join(jctx, kube, membership.Options{
		Namespace: c.ShardNamespace, Group: c.ShardGroup, Identity: c.ShardIdentity, LeaseDuration: c.ShardLeaseDuration,
	})
	if err != nil {
		return nil, fmt.Errorf("joining shard group %q (Leases in namespace %q; needs get, list, watch, create, update and delete on leases.coordination.k8s.io there): %w",
			c.ShardGroup, c.ShardNamespace, err)
	}
	return m, nil
}
