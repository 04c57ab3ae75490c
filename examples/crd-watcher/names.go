package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
)

// resourceCandidates lists what a user may have meant by a resource name,
// from discovery: each resource labelled as kubectl shows it, "gateways
// (gtw)", qualified with its group when another group serves the same
// plural, and matched against its plural, kind, short names and
// plural.group.
func resourceCandidates(resources []discoveryresolver.Resource) []candidate {
	groups := map[string]int{}
	for _, r := range resources {
		groups[r.GVR.Resource]++
	}
	out := make([]candidate, 0, len(resources))
	for _, r := range resources {
		label := r.GVR.Resource
		if groups[r.GVR.Resource] > 1 && r.GVR.Group != "" {
			label += "." + r.GVR.Group
		}
		if len(r.ShortNames) > 0 {
			label += " (" + strings.Join(r.ShortNames, ", ") + ")"
		}
		names := append([]string{r.GVR.Resource, strings.ToLower(r.GVK.Kind)}, r.ShortNames...)
		if r.GVR.Group != "" {
			names = append(names, r.GVR.Resource+"."+r.GVR.Group)
		}
		out = append(out, candidate{Label: label, Names: names})
	}
	return out
}

// resolveError explains why a name cannot be watched, in the user's
// terms, as a usage error when the name (not the network) is the problem.
// served lists the served resources for suggestions (nil: none).
func resolveError(name string, err error, served []discoveryresolver.Resource) error {
	var amb *discoveryresolver.AmbiguousError
	switch {
	case errors.As(err, &amb):
		var cands []string
		for _, c := range amb.Candidates {
			cands = append(cands, gvrString(c.GVR))
		}
		return usagef("resource %q is ambiguous; qualify it with its group, one of: %s", name, strings.Join(cands, ", "))
	case errors.Is(err, discoveryresolver.ErrNotFound):
		msg := fmt.Sprintf("unknown resource %q: the server serves no resource of that name", name)
		if s := suggest(name, resourceCandidates(served), 3); len(s) > 0 {
			msg += didYouMean(s)
		} else {
			msg += " (kubectl api-resources lists them; --wait-for-crds with resource.version.group waits for a CRD)"
		}
		var gde *discoveryresolver.GroupDiscoveryError
		if errors.As(err, &gde) {
			var gvs []string
			for gv := range gde.Groups {
				gvs = append(gvs, gv.String())
			}
			sort.Strings(gvs)
			msg += fmt.Sprintf(" (discovery failed for %s: it may be served there)", strings.Join(gvs, ", "))
		}
		return usagef("%s", msg)
	case errors.Is(err, discoveryresolver.ErrNotWatchable):
		return usagef("resource %q cannot be watched (it does not support list and watch)", name)
	case errors.Is(err, discoveryresolver.ErrSubresource):
		return usagef("resource %q is a subresource; subresources cannot be watched", name)
	case errors.Is(err, dynamicinformer.ErrInvalid): // the message names the option (a namespace of a cluster-scoped resource, a selector)
		return usagef("resource %q: %v", name, err)
	}
	return fmt.Errorf("resource %q: %w", name, err)
}

// waitNameError explains why a name that is not served cannot be waited
// for with --wait-for-crds: it must be resource.version.group. A name of
// that shape whose first part is capitalised is a Kind; the message gives
// the plural form the CRD most likely has.
func waitNameError(name string, served []discoveryresolver.Resource) error {
	parts := strings.SplitN(name, ".", 3)
	if len(parts) == 3 && parts[0] != "" && parts[2] != "" && versionRE.MatchString(parts[1]) && strings.ToLower(parts[0]) != parts[0] {
		plural := guessPlural(parts[0])
		return usagef("resource %q is not served, and %q looks like a Kind: --wait-for-crds needs the resource's plural name, most likely %s.%s.%s (the CRD's spec.names.plural)",
			name, parts[0], plural, parts[1], parts[2])
	}
	msg := fmt.Sprintf("resource %q is not served by the cluster; to wait for it with --wait-for-crds, name it fully qualified as resource.version.group (for example crontabs.v1.stable.example.com)", name)
	if s := suggest(name, resourceCandidates(served), 3); len(s) > 0 {
		msg += didYouMean(s)
	}
	return usagef("%s", msg)
}

// guessPlural spells a Kind the way CRDs conventionally name their plural:
// lower case, English plural (Policy → policies, Gateway → gateways,
// Ingress → ingresses).
func guessPlural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "z"),
		strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	}
	return k + "s"
}

// unknownSelection lists each --group and --category that no served
// resource has, with the closest ones the server knows: `--category
// "gatway-api": the server knows no such category; did you mean
// gateway-api?`. Empty when the server knows every one.
func unknownSelection(groups, categories []string, served []discoveryresolver.Resource) []string {
	knownGroups, knownCats := map[string]bool{}, map[string]bool{}
	for _, r := range served {
		knownGroups[r.GVR.Group] = true
		for _, c := range r.Categories {
			knownCats[c] = true
		}
	}
	var problems []string
	check := func(flag string, given []string, known map[string]bool) {
		var cands []candidate
		var names []string
		for k := range known {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, n := range names {
			cands = append(cands, candidate{Label: n, Names: []string{n}})
		}
		for _, g := range given {
			if known[g] {
				continue
			}
			p := fmt.Sprintf("--%s %q: the server knows no such %s", flag, g, flag)
			if s := suggest(g, cands, 3); len(s) > 0 {
				p += didYouMean(s)
			} else if flag == "category" {
				p += " (categories it knows: " + strings.Join(names, ", ") + ")"
			}
			problems = append(problems, p)
		}
	}
	check("group", groups, knownGroups)
	check("category", categories, knownCats)
	return problems
}

// groupOrCategoryError explains an --all selection that matches nothing:
// which --group or --category the server does not know, with the closest
// ones it does.
func groupOrCategoryError(groups, categories []string, served []discoveryresolver.Resource) error {
	problems := unknownSelection(groups, categories, served)
	if len(problems) == 0 {
		return usagef("--all: no served resource that supports list and watch matches --group %s --category %s together", strings.Join(groups, ","), strings.Join(categories, ","))
	}
	return usagef("nothing to watch: %s", strings.Join(problems, "; "))
}

// checkSelection judges an --all selection once discovery has answered
// (matched: the resources it matches now). A --group or --category that
// no served resource has is a usage error, as an unknown --resource is,
// also when the others match; under --wait-for-crds it is waited for
// instead, and note (called once) says so in one line. A selection that
// matches nothing is an error, or under --wait-for-crds a wait.
func checkSelection(groups, categories []string, matched int, waitForCRDs bool, served []discoveryresolver.Resource, note func(format string, args ...any)) error {
	problems := unknownSelection(groups, categories, served)
	switch {
	case !waitForCRDs && matched == 0:
		return groupOrCategoryError(groups, categories, served)
	case !waitForCRDs && len(problems) > 0:
		return usagef("--all: %s (with --wait-for-crds it is waited for)", strings.Join(problems, "; "))
	case len(problems) > 0:
		note("waiting (--wait-for-crds): %s; no served resource has it yet, resources that join it are watched when they are served", strings.Join(problems, "; "))
	case matched == 0:
		note("waiting (--wait-for-crds): no served resource matches --group %s --category %s yet; resources that match are watched when they are served",
			strings.Join(groups, ","), strings.Join(categories, ","))
	}
	return nil
}

// gvrString spells a GVR the way kubectl accepts it fully qualified:
// crontabs.v1.stable.example.com, pods.v1 (core group).
func gvrString(gvr schema.GroupVersionResource) string {
	if gvr.Version == "" && gvr.Group == "" {
		return gvr.Resource // a name not resolved yet (several contexts)
	}
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}
