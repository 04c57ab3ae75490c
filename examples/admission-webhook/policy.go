package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"
)

// PolicySpec is one policy as written in a policy file. A file holds one
// or more policies, one per YAML document.
//
//	name: ingress-host-unique          # unique across all files
//	failurePolicy: Fail                # or Ignore: what to answer when a cache is not Synced
//	match:
//	  resources: [ingresses.networking.k8s.io]   # kubectl names
//	  operations: [CREATE, UPDATE]               # default: CREATE, UPDATE
//	  namespaces: [team-a]                       # default: all
//	  labelSelector: "app=web"                   # default: everything
//	validations:
//	- expression: "object.spec.replicas <= 3"    # CEL, as in ValidatingAdmissionPolicy
//	  message: "at most 3 replicas"
type PolicySpec struct {
	Name          string           `yaml:"name"`
	FailurePolicy string           `yaml:"failurePolicy"`
	Match         MatchSpec        `yaml:"match"`
	Validations   []ValidationSpec `yaml:"validations"`
}

// MatchSpec says which requests a policy judges.
type MatchSpec struct {
	Resources     []string `yaml:"resources"`
	Operations    []string `yaml:"operations"`
	Namespaces    []string `yaml:"namespaces"`
	LabelSelector string   `yaml:"labelSelector"`
}

// ValidationSpec is one CEL expression that must be true, and the message
// given when it is false. Expression is kept as a YAML node for its line.
type ValidationSpec struct {
	Expression yaml.Node `yaml:"expression"`
	Message    string    `yaml:"message"`
}

// Failure policies, as in a ValidatingWebhookConfiguration.
const (
	failurePolicyFail   = "Fail"
	failurePolicyIgnore = "Ignore"
)

var allOperations = []string{"CREATE", "UPDATE", "DELETE", "CONNECT"}

// sourcePolicy is a PolicySpec with where it was read.
type sourcePolicy struct {
	PolicySpec
	File string
	Line int
	// ResourceLines are the lines of Match.Resources' entries.
	ResourceLines []int
}

// resourceLine is the line of Match.Resources[i] (the policy's line if
// unknown).
func (p *sourcePolicy) resourceLine(i int) int {
	if i < len(p.ResourceLines) {
		return p.ResourceLines[i]
	}
	return p.Line
}

// mappingValue returns the value node of key in a mapping node, nil if
// absent.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// PolicyError says why a policy (or a whole file) was refused: its file,
// its line, and the error (for CEL, the compiler's message).
type PolicyError struct {
	File   string
	Line   int
	Policy string // "" when the file did not parse far enough to name it
	Err    error
}

func (e *PolicyError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Policy != "" {
		return fmt.Sprintf("%s: policy %q: %v", loc, e.Policy, e.Err)
	}
	return fmt.Sprintf("%s: %v", loc, e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// policyFiles lists the policy files of dir (*.yaml and *.yml, not hidden),
// sorted.
func policyFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		files = append(files, filepath.Join(dir, n))
	}
	sort.Strings(files)
	return files, nil
}

// parsePolicyFile reads the policies of one file. A document that does not
// decode refuses the whole file (its line is the YAML error's); a policy
// whose fields are wrong is refused alone.
func parsePolicyFile(file string, data []byte) ([]sourcePolicy, []*PolicyError) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []sourcePolicy
	var errs []*PolicyError
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, []*PolicyError{{File: file, Line: yamlErrorLine(err), Err: err}}
		}
		if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
			continue // an empty document
		}
		root := doc.Content[0]
		var p PolicySpec
		if err := root.Decode(&p); err != nil {
			errs = append(errs, &PolicyError{File: file, Line: yamlErrorLine(err), Err: err})
			if errs[len(errs)-1].Line == 0 {
				errs[len(errs)-1].Line = root.Line
			}
			continue
		}
		sp := sourcePolicy{PolicySpec: p, File: file, Line: root.Line}
		if res := mappingValue(mappingValue(root, "match"), "resources"); res != nil && res.Kind == yaml.SequenceNode {
			for _, item := range res.Content {
				sp.ResourceLines = append(sp.ResourceLines, item.Line)
			}
		}
		if err := sp.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, sp)
	}
	return out, errs
}

// yamlErrorLine reads the line number out of a yaml.v3 error ("yaml: line
// 7: ..."), 0 if there is none.
func yamlErrorLine(err error) int {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	var line int
	if i := strings.Index(msg, "line "); i >= 0 {
		_, _ = fmt.Sscanf(msg[i:], "line %d", &line)
	}
	return line
}

// validate checks what does not need the cluster or CEL.
func (p *sourcePolicy) validate() *PolicyError {
	fail := func(line int, format string, args ...any) *PolicyError {
		return &PolicyError{File: p.File, Line: line, Policy: p.Name, Err: fmt.Errorf(format, args...)}
	}
	if p.Name == "" {
		return fail(p.Line, "name is required")
	}
	if msgs := validPolicyName(p.Name); msgs != "" {
		return fail(p.Line, "name %q: %s", p.Name, msgs)
	}
	switch p.FailurePolicy {
	case "":
		p.FailurePolicy = failurePolicyFail
	case failurePolicyFail, failurePolicyIgnore:
	default:
		return fail(p.Line, "failurePolicy %q: must be Fail or Ignore", p.FailurePolicy)
	}
	if len(p.Match.Resources) == 0 {
		return fail(p.Line, "match.resources is required")
	}
	if len(p.Match.Operations) == 0 {
		p.Match.Operations = []string{"CREATE", "UPDATE"}
	}
	for i, op := range p.Match.Operations {
		op = strings.ToUpper(op)
		p.Match.Operations[i] = op
		if op != "*" && !slices.Contains(allOperations, op) {
			return fail(p.Line, "match.operations: %q is not one of %v or *", op, allOperations)
		}
	}
	if _, err := labels.Parse(p.Match.LabelSelector); err != nil {
		return fail(p.Line, "match.labelSelector: %v", err)
	}
	if len(p.Validations) == 0 {
		return fail(p.Line, "validations: at least one is required")
	}
	for i, v := range p.Validations {
		if v.Expression.Kind != yaml.ScalarNode || strings.TrimSpace(v.Expression.Value) == "" {
			return fail(p.Line, "validations[%d].expression is required", i)
		}
		if v.Message == "" {
			return fail(v.Expression.Line, "validations[%d].message is required", i)
		}
	}
	return nil
}

// validPolicyName accepts what can be part of a webhook name and a URL
// path: lower-case letters, digits and '-', starting with a letter.
func validPolicyName(name string) string {
	if len(name) > 63 {
		return "longer than 63 characters"
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z':
		case (r >= '0' && r <= '9' || r == '-') && i > 0:
		default:
			return "must be lower-case letters, digits and '-', starting with a letter"
		}
	}
	return ""
}

// expressionLine is the file line on which line celLine (1-based) of an
// expression's text stands: a block scalar (| or >) starts on the line
// after its key.
func expressionLine(n *yaml.Node, celLine int) int {
	line := n.Line
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		line++
	}
	if celLine > 1 {
		line += celLine - 1
	}
	return line
}
