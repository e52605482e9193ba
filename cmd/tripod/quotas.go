package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// quotaEntityFlags are kafka-configs' flags naming a client quota entity:
// --entity-type users|clients|ips with --entity-name or --entity-default,
// and the shorthands --user, --client, --ip and their --*-defaults.
type quotaEntityFlags struct {
	entityTypes, entityNames []string
	entityDefault            bool
	user, client, ip         string
	userDefaults             bool
	clientDefaults           bool
	ipDefaults               bool
}

func (f *quotaEntityFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.entityTypes, "entity-type", nil, "users, clients or ips (users and clients together for a user's client)")
	fs.StringArrayVar(&f.entityNames, "entity-name", nil, "the entity's name, in the order of --entity-type")
	fs.BoolVar(&f.entityDefault, "entity-default", false, "the default of the (last) --entity-type")
	fs.StringVar(&f.user, "user", "", "a user principal's name")
	fs.StringVar(&f.client, "client", "", "a client id")
	fs.StringVar(&f.ip, "ip", "", "an ip address")
	fs.BoolVar(&f.userDefaults, "user-defaults", false, "the default user")
	fs.BoolVar(&f.clientDefaults, "client-defaults", false, "the default client id")
	fs.BoolVar(&f.ipDefaults, "ip-defaults", false, "the default ip")
}

// quotaPart is one part of an entity: its type ("user", "client-id",
// "ip") and name (nil: the default; unset: any, in describe).
type quotaPart struct {
	typ  string
	name *string
	any  bool
}

// parts returns the entity the flags name, in Kafka's order (user,
// client-id; or ip). With describe, a type without a name or default is
// any entity of that type.
func (f *quotaEntityFlags) parts(describe bool) ([]quotaPart, error) {
	byType := map[string]*quotaPart{}
	set := func(typ string, name *string, isDefault bool) error {
		if byType[typ] != nil {
			return fmt.Errorf("entity type %s given twice", typ)
		}
		p := &quotaPart{typ: typ, name: name}
		if name == nil && !isDefault {
			if !describe {
				return fmt.Errorf("--entity-type %s: want --entity-name or --entity-default", typ)
			}
			p.any = true
		}
		byType[typ] = p
		return nil
	}
	for i, t := range f.entityTypes {
		typ, ok := map[string]string{"users": "user", "clients": "client-id", "ips": "ip"}[t]
		if !ok {
			return nil, fmt.Errorf("--entity-type %q: want users, clients or ips", t)
		}
		var name *string
		if i < len(f.entityNames) {
			name = &f.entityNames[i]
		}
		isDefault := f.entityDefault && i == len(f.entityTypes)-1 && name == nil
		if err := set(typ, name, isDefault); err != nil {
			return nil, err
		}
	}
	if len(f.entityNames) > len(f.entityTypes) {
		return nil, fmt.Errorf("--entity-name given %d times for %d --entity-type", len(f.entityNames), len(f.entityTypes))
	}
	for _, s := range []struct {
		typ       string
		name      string
		isDefault bool
	}{{"user", f.user, f.userDefaults}, {"client-id", f.client, f.clientDefaults}, {"ip", f.ip, f.ipDefaults}} {
		switch {
		case s.name != "" && s.isDefault:
			return nil, fmt.Errorf("a %s name and its defaults flag together: want one", s.typ)
		case s.name != "":
			if err := set(s.typ, &s.name, false); err != nil {
				return nil, err
			}
		case s.isDefault:
			if err := set(s.typ, nil, true); err != nil {
				return nil, err
			}
		}
	}
	var out []quotaPart
	for _, typ := range []string{"user", "client-id", "ip"} {
		if p := byType[typ]; p != nil {
			out = append(out, *p)
		}
	}
	if len(out) == 0 && !describe {
		return nil, errors.New("no entity: want --entity-type with --entity-name or --entity-default (or --user, --client, --ip)")
	}
	if byType["ip"] != nil && len(out) > 1 {
		return nil, errors.New("an ip entity is not combined with a user or client")
	}
	return out, nil
}

// newQuotasCmd builds `tripod quotas describe|alter`, which manages
// client quotas through DescribeClientQuotas and AlterClientQuotas
// (KIP-546), as kafka-configs --entity-type users|clients|ips does.
func newQuotasCmd() *cobra.Command {
	opts := &topicsOptions{}
	cmd := &cobra.Command{
		Use:   "quotas",
		Short: "Describe and alter client quotas (like kafka-configs --entity-type users|clients|ips)",
		Long: `Describe and alter the client quotas: producer_byte_rate,
consumer_byte_rate, request_percentage and controller_mutation_rate of
users, client ids and users' client ids, and connection_creation_rate of
ips, each with a default. Every broker applies a change without a
restart. With an authorizer, describe needs DESCRIBE_CONFIGS and alter
ALTER_CONFIGS on the cluster.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	pf.StringVar(&opts.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (kafka-configs' name)")
	pf.Lookup("bootstrap-server").Hidden = true
	pf.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	opts.security.addFlags(cmd)
	cmd.AddCommand(newQuotasDescribeCmd(opts), newQuotasAlterCmd(opts))
	return cmd
}

// quotaEntityString is an entity as kafka-configs prints it:
// user-principal 'alice', client-id 'app', the default user-principal.
func quotaEntityString(e kadm.ClientQuotaEntity) string {
	var parts []string
	for _, c := range e {
		typ := c.Type
		if typ == "user" {
			typ = "user-principal"
		}
		if c.Name == nil {
			parts = append(parts, "the default "+typ)
		} else {
			parts = append(parts, fmt.Sprintf("%s '%s'", typ, *c.Name))
		}
	}
	return strings.Join(parts, ", ")
}

// javaDouble formats v as Java's Double.toString does for the values a
// quota takes (1048576.0, 50.5).
func javaDouble(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// newQuotasDescribeCmd builds `tripod quotas describe`.
func newQuotasDescribeCmd(opts *topicsOptions) *cobra.Command {
	var flags quotaEntityFlags
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Describe client quotas",
		Long: `Describe the quotas of the entity the flags name, or of every entity of
the given types (an --entity-type without --entity-name or
--entity-default), or of every entity: one line per entity, as
kafka-configs prints it:

  Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parts, err := flags.parts(true)
			if err != nil {
				return err
			}
			var filter []kadm.DescribeClientQuotaComponent
			for _, p := range parts {
				c := kadm.DescribeClientQuotaComponent{Type: p.typ}
				switch {
				case p.any:
					c.MatchType = 2
				case p.name == nil:
					c.MatchType = 1
				default:
					c.MatchName = p.name
				}
				filter = append(filter, c)
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			described, err := adm.DescribeClientQuotas(ctx, len(parts) > 0, filter)
			if err != nil {
				return fmt.Errorf("describe client quotas: %w", err)
			}
			printQuotas(cmd.OutOrStdout(), described)
			return nil
		},
	}
	flags.add(cmd)
	return cmd
}

func printQuotas(w io.Writer, described kadm.DescribedClientQuotas) {
	var lines []string
	for _, d := range described {
		values := slices.Clone(d.Values)
		slices.SortFunc(values, func(a, b kadm.ClientQuotaValue) int { return strings.Compare(a.Key, b.Key) })
		var kv []string
		for _, v := range values {
			kv = append(kv, v.Key+"="+javaDouble(v.Value))
		}
		lines = append(lines, fmt.Sprintf("Quota configs for %s are %s", quotaEntityString(d.Entity), strings.Join(kv, ", ")))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// newQuotasAlterCmd builds `tripod quotas alter`.
func newQuotasAlterCmd(opts *topicsOptions) *cobra.Command {
	var flags quotaEntityFlags
	var add, del string
	cmd := &cobra.Command{
		Use:   "alter",
		Short: "Set and delete client quotas",
		Long: `Set (--add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152')
and delete (--delete-config 'request_percentage') the quotas of the
entity the flags name. The keys are producer_byte_rate,
consumer_byte_rate (bytes/s), request_percentage (percent of a thread),
controller_mutation_rate (partitions/s) for users and clients, and
connection_creation_rate (connections/s) for ips.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parts, err := flags.parts(false)
			if err != nil {
				return err
			}
			var ops []kadm.AlterClientQuotaOp
			for item := range strings.SplitSeq(add, ",") {
				if item = strings.TrimSpace(item); item == "" {
					continue
				}
				key, value, ok := strings.Cut(item, "=")
				v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if !ok || err != nil {
					return fmt.Errorf("--add-config %q: want KEY=NUMBER[,KEY=NUMBER]", item)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: strings.TrimSpace(key), Value: v})
			}
			for key := range strings.SplitSeq(del, ",") {
				if key = strings.TrimSpace(key); key != "" {
					ops = append(ops, kadm.AlterClientQuotaOp{Key: key, Remove: true})
				}
			}
			if len(ops) == 0 {
				return errors.New("nothing to alter: want --add-config or --delete-config")
			}
			var entity kadm.ClientQuotaEntity
			for _, p := range parts {
				entity = append(entity, kadm.ClientQuotaEntityComponent{Type: p.typ, Name: p.name})
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
			if err != nil {
				return fmt.Errorf("alter client quotas: %w", err)
			}
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("alter client quotas of %s: %w", quotaEntityString(r.Entity), resultError(r.Err, r.ErrMessage))
				}
			}
			// kafka-configs names the first entity type and its name.
			first := parts[0]
			typ := map[string]string{"user": "user", "client-id": "client", "ip": "ip"}[first.typ]
			if first.name != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "Completed updating config for %s %s.\n", typ, *first.name)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Completed updating default config for %ss in the cluster.\n", typ)
			}
			return nil
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&add, "add-config", "", "KEY=NUMBER[,KEY=NUMBER]: quotas to set")
	cmd.Flags().StringVar(&del, "delete-config", "", "KEY[,KEY]: quotas to delete")
	return cmd
}
