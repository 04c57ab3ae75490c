package access

import "slices"

// Rule is one resource rule of a SelfSubjectRulesReview.
type Rule struct {
	Verbs, APIGroups, Resources, ResourceNames []string
}

// Rules is what a SelfSubjectRulesReview says the user may do in one
// namespace. Incomplete: some authorizer could not list its rules (or
// the evaluation failed), so a missing rule is no denial and a rule found
// no grant (another authorizer may deny first): ask access reviews.
type Rules struct {
	Resource   []Rule
	Incomplete bool
}

// Allows reports whether some rule grants verb on every object of
// group/resource, as RBAC matches them: "*" matches any verb, group or
// resource; a rule limited to resourceNames grants no list or watch of
// all objects.
func (r Rules) Allows(verb, group, resource string) bool {
	return slices.ContainsFunc(r.Resource, func(rule Rule) bool {
		return len(rule.ResourceNames) == 0 &&
			matches(rule.Verbs, verb) && matches(rule.APIGroups, group) && matches(rule.Resources, resource)
	})
}

func matches(allowed []string, v string) bool {
	return slices.ContainsFunc(allowed, func(a string) bool { return a == "*" || a == v })
}
