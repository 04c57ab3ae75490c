package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// ConfigFileError is a mistake in the config file, at a line and key.
type ConfigFileError struct {
	File string // as given to --config
	Line int    // 1-based; 0 when the file as a whole is wrong
	Key  string // the key's path, "resources[1].namespaces"; "" for a syntax error
	Msg  string
}

func (e *ConfigFileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		fmt.Fprintf(&b, "%s: ", e.Key)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// fileKind is the shape a config file key takes.
type fileKind int

const (
	kindString fileKind = iota
	kindBool
	kindStrings
	kindDuration
	kindResources
)

// fileKeys are the config file's keys with their shapes and where they go.
// Every key is also a flag (README.md lists both).
var fileKeys = map[string]struct {
	kind fileKind
	set  func(c *Config) any // pointer to the field
}{
	"kubeconfig":         {kindString, func(c *Config) any { return &c.Kubeconfig }},
	"context":            {kindString, func(c *Config) any { return &c.Context }},
	"demo":               {kindBool, func(c *Config) any { return &c.Demo }},
	"resources":          {kindResources, func(c *Config) any { return &c.Resources }},
	"all":                {kindBool, func(c *Config) any { return &c.All }},
	"groups":             {kindStrings, func(c *Config) any { return &c.Groups }},
	"categories":         {kindStrings, func(c *Config) any { return &c.Categories }},
	"namespaces":         {kindStrings, func(c *Config) any { return &c.Namespaces }},
	"labelSelector":      {kindString, func(c *Config) any { return &c.LabelSelector }},
	"fieldSelector":      {kindString, func(c *Config) any { return &c.FieldSelector }},
	"waitForCRDs":        {kindBool, func(c *Config) any { return &c.WaitForCRDs }},
	"output":             {kindString, func(c *Config) any { return &c.Output }},
	"showObject":         {kindBool, func(c *Config) any { return &c.ShowObject }},
	"ignorePaths":        {kindStrings, func(c *Config) any { return &c.IgnorePaths }},
	"metricsAddr":        {kindString, func(c *Config) any { return &c.MetricsAddr }},
	"duration":           {kindDuration, func(c *Config) any { return &c.Duration }},
	"requestTimeout":     {kindDuration, func(c *Config) any { return &c.RequestTimeout }},
	"exitOnFailure":      {kindBool, func(c *Config) any { return &c.ExitOnFailure }},
	"verbose":            {kindBool, func(c *Config) any { return &c.Verbose }},
	"accessCheck":        {kindBool, func(c *Config) any { return &c.AccessCheck }},
	"shard":              {kindString, func(c *Config) any { return &c.Shard }},
	"shardGroup":         {kindString, func(c *Config) any { return &c.ShardGroup }},
	"shardNamespace":     {kindString, func(c *Config) any { return &c.ShardNamespace }},
	"shardIdentity":      {kindString, func(c *Config) any { return &c.ShardIdentity }},
	"shardLeaseDuration": {kindDuration, func(c *Config) any { return &c.ShardLeaseDuration }},
	"cacheDir":           {kindString, func(c *Config) any { return &c.CacheDir }},
	"cacheSecrets":       {kindBool, func(c *Config) any { return &c.CacheSecrets }},
}

// resourceKeys are the keys of one entry of resources: in object form.
var resourceKeys = map[string]fileKind{
	"name": kindString, "namespaces": kindStrings, "labelSelector": kindString, "fieldSelector": kindString,
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseConfigFile reads the YAML (or JSON: JSON is YAML) config file
// strictly. Every mistake is a *ConfigFileError naming the file, the line
// and the key: unknown keys (with the closest known key), keys given
// twice, values of the wrong shape, durations that do not parse. The
// returned Config has the keys that were set; set lists them.
func parseConfigFile(file string, data []byte) (c *Config, set map[string]bool, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		e := &ConfigFileError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = m[2]
		}
		if indentationError(e.Msg) {
			e.Msg += " (check the indentation of this line and the next: the keys of one mapping, and the \"- \" items of one list, start in the same column)"
		}
		return nil, nil, e
	}
	c, set = &Config{}, map[string]bool{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c, set, nil // an empty file sets nothing
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return c, set, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, nil, &ConfigFileError{File: file, Line: top.Line, Msg: "want a mapping of keys (resources:, namespaces:, ...), got " + describe(top)}
	}
	if err := foldedLists(file, strings.Split(string(data), "\n"), top, ""); err != nil {
		return nil, nil, err
	}
	known := make([]string, 0, len(fileKeys))
	for k := range fileKeys {
		known = append(known, k)
	}
	sort.Strings(known)
	firstLine := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		spec, ok := fileKeys[k.Value]
		if !ok {
			return nil, nil, unknownKey(file, k, "", known)
		}
		if l, dup := firstLine[k.Value]; dup {
			return nil, nil, &ConfigFileError{File: file, Line: k.Line, Key: k.Value, Msg: fmt.Sprintf("given twice (first on line %d)", l)}
		}
		firstLine[k.Value] = k.Line
		if err := decodeValue(file, k.Value, v, spec.kind, spec.set(c)); err != nil {
			return nil, nil, err
		}
		set[k.Value] = true
	}
	return c, set, nil
}

// indentationError reports whether a YAML syntax error is the kind an
// indentation slip causes.
func indentationError(msg string) bool {
	for _, m := range []string{"did not find expected '-' indicator", "mapping values are not allowed", "did not find expected key", "block sequence entries are not allowed"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// foldedLists finds the value an indentation slip makes of list items: a
// "- cm" indented deeper than the "- wdg" above it continues that item,
// so YAML reads one plain value "wdg - cm" spanning two lines. path is
// n's key path ("" at the top).
func foldedLists(file string, lines []string, n *yaml.Node, path string) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			if err := foldedLists(file, lines, n.Content[i+1], p); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			if err := foldedLists(file, lines, item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.Style != 0 || !strings.Contains(n.Value, " - ") || n.Line < 1 || n.Line > len(lines) {
			return nil // quoted or block scalars say what they mean
		}
		first := lines[n.Line-1]
		if c := n.Column - 1; c >= 0 && c <= len(first) && strings.Contains(first[c:], n.Value) {
			return nil // on one line: meant so
		}
		for l := n.Line; l < len(lines); l++ { // lines[l] is line l+1
			t := strings.TrimSpace(lines[l])
			if t == "-" || strings.HasPrefix(t, "- ") {
				return &ConfigFileError{File: file, Line: l + 1, Key: path, Msg: fmt.Sprintf(
					"%q reads as one value: this \"- \" is indented deeper than the one on line %d, so it continues that item instead of starting one; start every \"- \" of a list in the same column",
					n.Value, n.Line)}
			}
		}
	}
	return nil
}

func unknownKey(file string, k *yaml.Node, prefix string, known []string) error {
	cands := make([]candidate, len(known))
	for i, n := range known {
		cands[i] = candidate{Label: n, Names: []string{n}}
	}
	msg := "unknown key"
	if s := suggest(k.Value, cands, 1); len(s) > 0 {
		msg += didYouMean(quoteAll(s))
	} else {
		msg += " (known keys: " + strings.Join(known, ", ") + ")"
	}
	return &ConfigFileError{File: file, Line: k.Line, Key: prefix + k.Value, Msg: msg}
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Quote(v)
	}
	return out
}

// describe names what a node holds, for "want ..., got ..." messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!null":
		return "nothing (null)"
	case "!!bool":
		return "the boolean " + n.Value
	case "!!int", "!!float":
		return "the number " + n.Value
	}
	return strconv.Quote(n.Value)
}

func decodeValue(file, key string, v *yaml.Node, kind fileKind, dst any) error {
	short := key[strings.LastIndex(key, ".")+1:] // "namespaces" of "resources[1].namespaces", for examples
	bad := func(want string) error {
		return &ConfigFileError{File: file, Line: v.Line, Key: key, Msg: "want " + want + ", got " + describe(v)}
	}
	switch kind {
	case kindString:
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return bad("a string")
		}
		*dst.(*string) = v.Value
	case kindBool:
		if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
			return bad("true or false")
		}
		b, err := strconv.ParseBool(v.Value)
		if err != nil {
			return bad("true or false")
		}
		*dst.(*bool) = b
	case kindDuration:
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return bad(`a duration such as "30s" or "5m"`)
		}
		d, err := time.ParseDuration(v.Value)
		if err != nil {
			return bad(`a duration such as "30s" or "5m"`)
		}
		*dst.(*time.Duration) = d
	case kindStrings:
		if v.Kind != yaml.SequenceNode {
			return bad("a list of strings, e.g. " + short + ": [" + orExample(v.Value) + "]")
		}
		var out []string
		for i, item := range v.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return &ConfigFileError{File: file, Line: item.Line, Key: fmt.Sprintf("%s[%d]", key, i), Msg: "want a string, got " + describe(item)}
			}
			out = append(out, item.Value)
		}
		*dst.(*[]string) = out
	case kindResources:
		if v.Kind == yaml.MappingNode {
			return &ConfigFileError{File: file, Line: v.Line, Key: key, Msg: "want a list of resources, got a mapping: a list item starts with \"- \" (resources:, then \"  - name: ...\" on the next line)"}
		}
		if v.Kind != yaml.SequenceNode {
			return bad("a list of resources, e.g. resources: [" + orExample(v.Value) + "]")
		}
		var out []ResourceSpec
		for i, item := range v.Content {
			r, err := decodeResource(file, fmt.Sprintf("%s[%d]", key, i), item)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		*dst.(*[]ResourceSpec) = out
	}
	return nil
}

func orExample(v string) string {
	if v == "" {
		return "..."
	}
	return v
}

// decodeResource reads one entry of resources: a name, or an object with a
// name and its own namespaces and selectors.
func decodeResource(file, path string, n *yaml.Node) (ResourceSpec, error) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return ResourceSpec{Name: n.Value}, nil
	}
	if n.Kind != yaml.MappingNode {
		return ResourceSpec{}, &ConfigFileError{File: file, Line: n.Line, Key: path, Msg: "want a resource name or {name: ..., namespaces: [...], labelSelector: ..., fieldSelector: ...}, got " + describe(n)}
	}
	known := make([]string, 0, len(resourceKeys))
	for k := range resourceKeys {
		known = append(known, k)
	}
	sort.Strings(known)
	var r ResourceSpec
	dst := map[string]any{"name": &r.Name, "namespaces": &r.Namespaces, "labelSelector": &r.LabelSelector, "fieldSelector": &r.FieldSelector}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kind, ok := resourceKeys[k.Value]
		if !ok {
			return r, unknownKey(file, k, path+".", known)
		}
		if seen[k.Value] {
			return r, &ConfigFileError{File: file, Line: k.Line, Key: path + "." + k.Value, Msg: "given twice"}
		}
		seen[k.Value] = true
		if err := decodeValue(file, path+"."+k.Value, v, kind, dst[k.Value]); err != nil {
			return r, err
		}
	}
	if r.Name == "" {
		return r, &ConfigFileError{File: file, Line: n.Line, Key: path, Msg: "a resource without a name"}
	}
	return r, nil
}
