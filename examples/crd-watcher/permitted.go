package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// maxNamed is how many namespaces a scope summary names per reason before
// it counts the rest.
const maxNamed = 5

// missingVerbs finds the verbs the access check says are missing ("may
// not list, watch configmaps in namespace a").
var missingVerbs = regexp.MustCompile(`may not ([a-z]+(?:, [a-z]+)*) `)

// notPermittedReason is why a namespace is not permitted, short: the
// missing verbs ("may not list, watch"), or the server's words when it
// refused the namespace itself.
func notPermittedReason(why string) string {
	if m := missingVerbs.FindStringSubmatch(why); m != nil {
		return "may not " + m[1]
	}
	return why
}

// scopeText summarizes the namespaces of a --permitted-namespaces
// informer (Status.Permitted, Status.NotPermitted); "" for others:
// "permitted in 3 namespaces (a, b, c); not permitted in 7: may not list,
// watch in d, e, f, g, h and 2 more". Namespaces with the same reason are
// grouped, sorted; at most maxNamed are named per reason.
func scopeText(st dynamicinformer.Status) string {
	if st.Permitted == nil {
		return ""
	}
	var b strings.Builder
	switch {
	case len(st.Permitted) == 1 && st.Permitted[0] == "":
		b.WriteString("permitted in all namespaces")
	case len(st.Permitted) == 0:
		b.WriteString("permitted in no namespace")
	default:
		fmt.Fprintf(&b, "permitted in %s (%s)", plural(len(st.Permitted), "namespace"), namespaceList(st.Permitted))
	}
	if len(st.NotPermitted) > 0 {
		fmt.Fprintf(&b, "; not permitted in %d: %s", len(st.NotPermitted), notPermittedText(st.NotPermitted))
	}
	return b.String()
}

// notPermittedText groups namespaces by reason: "may not list, watch in
// d, e; may not watch in f".
func notPermittedText(notPermitted map[string]string) string {
	byReason := map[string][]string{}
	for ns, why := range notPermitted {
		r := notPermittedReason(why)
		byReason[r] = append(byReason[r], ns)
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		sort.Strings(byReason[r])
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = r + " in " + namespaceList(byReason[r])
	}
	return strings.Join(parts, "; ")
}

// namespaceList lists sorted namespaces, at most maxNamed, then how many more.
func namespaceList(ns []string) string {
	ns = append([]string(nil), ns...)
	sort.Strings(ns)
	if len(ns) <= maxNamed {
		return strings.Join(ns, ", ")
	}
	return strings.Join(ns[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(ns)-maxNamed)
}

// permittedNowhere: a synced informer of --permitted-namespaces that the
// user may see in no namespace (it holds nothing).
func permittedNowhere(st dynamicinformer.Status) bool {
	return st.State == dynamicinformer.Synced && st.Permitted != nil && len(st.Permitted) == 0 && st.Objects == 0
}

// sumPermittedNowhere prints one STATUS line for informers that are
// permittedNowhere (text output): how many, and the first names.
func (p *printer) sumPermittedNowhere(sts []dynamicinformer.Status) {
	names := make([]string, 0, len(sts))
	for _, st := range sts {
		names = append(names, gvrString(st.GVR))
	}
	sort.Strings(names)
	list := strings.Join(names, ", ")
	if len(names) > maxNamedNowhere {
		list = strings.Join(names[:maxNamedNowhere], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNamedNowhere)
	}
	p.writeLine(p.errOut, fmt.Sprintf("%s STATUS  %s Synced (0 objects); permitted in no namespace: %s (each gets its own line once a namespace is permitted; /readyz says why per resource)",
		p.now().Format("15:04:05.000"), plural(len(sts), "resource"), list))
}

// maxNamedNowhere bounds the names in a permittedNowhere line.
const maxNamedNowhere = 8
