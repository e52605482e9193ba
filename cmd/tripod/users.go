package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// newUsersCmd builds `tripod users list|set|delete`, which manages SCRAM
// credentials through DescribeUserScramCredentials and
// AlterUserScramCredentials (KIP-554), as kafka-configs --entity-type
// users does, on any Kafka-protocol cluster.
func newUsersCmd() *cobra.Command {
	opts := &topicsOptions{}
	cmd := &cobra.Command{
		Use:   "users",
		Short: "List, set and delete users' SCRAM credentials (like kafka-configs --entity-type users)",
		Long: `List, set and delete the SCRAM-SHA-256 and SCRAM-SHA-512 credentials that
SASL/SCRAM clients authenticate with. The password never leaves this
process: it is salted and hashed here (PBKDF2), and the broker stores
only what SCRAM needs. A broker takes a new credential without a restart.

Without an authorizer, a broker lets anyone who reaches a listener alter
credentials, as Kafka does: give the brokers an authenticating listener
and use --sasl-* (and --tls-ca on SASL_SSL) to reach it. With one
(authorizer.class.name), listing needs DESCRIBE and changes need ALTER
on the cluster, which a super user has.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	pf.StringVar(&opts.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (kafka-configs' name)")
	pf.Lookup("bootstrap-server").Hidden = true
	pf.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	opts.security.addFlags(cmd)
	cmd.AddCommand(newUsersListCmd(opts), newUsersSetCmd(opts), newUsersDeleteCmd(opts))
	return cmd
}

// clientSecurity holds the flags with which a command authenticates to
// the brokers: Kafka clients' security.protocol, sasl.mechanism and
// ssl.truststore settings, as flags.
type clientSecurity struct {
	saslMechanism, saslUsername, saslPassword, saslPasswordFile string
	tls                                                         bool
	tlsCA                                                       string
}

// addFlags adds the security flags to cmd and its subcommands.
func (s *clientSecurity) addFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&s.saslMechanism, "sasl-mechanism", "", "authenticate with SASL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)")
	fs.StringVar(&s.saslUsername, "sasl-username", "", "the SASL user")
	fs.StringVar(&s.saslPassword, "sasl-password", "", "the SASL user's password")
	fs.StringVar(&s.saslPasswordFile, "sasl-password-file", "", "a file whose first line is the SASL user's password (- for standard input)")
	fs.BoolVar(&s.tls, "tls", false, "connect over TLS (SSL and SASL_SSL listeners), trusting the system's CAs unless --tls-ca is given")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM file of the CA certificates to trust; implies --tls")
}

// clientOpts returns the franz-go options of the security flags.
func (s *clientSecurity) clientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.tls || s.tlsCA != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.tlsCA != "" {
			pem, err := os.ReadFile(s.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in the file", s.tlsCA)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.saslMechanism == "" {
		if s.saslUsername != "" || s.saslPassword != "" || s.saslPasswordFile != "" {
			return nil, errors.New("--sasl-username and --sasl-password need --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		return opts, nil
	}
	password, err := secret("--sasl-password", s.saslPassword, s.saslPasswordFile)
	if err != nil {
		return nil, err
	}
	if s.saslUsername == "" {
		return nil, fmt.Errorf("--sasl-mechanism %s needs --sasl-username", s.saslMechanism)
	}
	var m sasl.Mechanism
	switch strings.ToUpper(s.saslMechanism) {
	case "PLAIN":
		m = plain.Auth{User: s.saslUsername, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: s.saslUsername, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: s.saslUsername, Pass: password}.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.saslMechanism)
	}
	return append(opts, kgo.SASL(m)), nil
}

// secret returns a password given by flag (value) or by flag+"-file"
// (file, whose first line it is; "-" reads standard input): exactly one.
func secret(flag, value, file string) (string, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("%s and %s-file: give one of them", flag, flag)
	case file == "":
		if value == "" {
			return "", fmt.Errorf("%s or %s-file: a password is needed", flag, flag)
		}
		return value, nil
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("%s-file: %w", flag, err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("%s-file %s: the first line is empty", flag, file)
	}
	return line, nil
}

// scramMechanisms are the SCRAM mechanisms by name.
var scramMechanisms = map[string]kadm.ScramMechanism{"SCRAM-SHA-256": kadm.ScramSha256, "SCRAM-SHA-512": kadm.ScramSha512}

// parseScramMechanism reads --mechanism, in any case.
func parseScramMechanism(value string) (kadm.ScramMechanism, error) {
	m, ok := scramMechanisms[strings.ToUpper(value)]
	if !ok {
		return 0, fmt.Errorf("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", value)
	}
	return m, nil
}

// resultError is a user's error in a SCRAM credentials answer, with the
// broker's message.
func resultError(err error, msg string) error {
	if msg != "" && err != nil {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// newUsersListCmd builds `tripod users list [NAME...]`.
func newUsersListCmd(opts *topicsOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list [NAME...]",
		Short: "List the users' SCRAM credentials",
		Long: `List the SCRAM credentials of the named users, or of every user that has
one, in columns USER MECHANISM ITERATIONS, a row per credential, sorted
by user; nothing when there is none. Salts and keys are never shown. A
named user without credentials is an error.`,
		RunE: func(cmd *cobra.Command, names []string) error {
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			described, err := adm.DescribeUserSCRAMs(ctx, names...)
			if err != nil {
				return fmt.Errorf("describe SCRAM credentials: %w", err)
			}
			var rows [][3]string
			var failed []error
			for _, d := range described.Sorted() {
				if d.Err != nil {
					failed = append(failed, fmt.Errorf("user %s: %w", d.User, resultError(d.Err, d.ErrMessage)))
					continue
				}
				infos := slices.Clone(d.CredInfos)
				slices.SortFunc(infos, func(a, b kadm.CredInfo) int { return int(a.Mechanism) - int(b.Mechanism) })
				for _, c := range infos {
					rows = append(rows, [3]string{d.User, c.Mechanism.String(), fmt.Sprint(c.Iterations)})
				}
			}
			if len(rows) > 0 {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", r[0], r[1], r[2])
				}
				tw.Flush()
			}
			return errors.Join(failed...)
		},
	}
}

// newUsersSetCmd builds `tripod users set NAME`.
func newUsersSetCmd(opts *topicsOptions) *cobra.Command {
	var (
		mechanism, password, passwordFile string
		iterations                        int32
	)
	cmd := &cobra.Command{
		Use:   "set NAME (--password P | --password-file F)",
		Short: "Add or replace a user's SCRAM credential",
		Long: `Add NAME's SCRAM credential of --mechanism, or replace it, with the
password given by --password or, better kept out of the process list and
the shell's history, by --password-file (its first line; - reads standard
input). --iterations is the PBKDF2 iteration count, 4096 to 16384.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := parseScramMechanism(mechanism)
			if err != nil {
				return err
			}
			if iterations < 4096 || iterations > 16384 {
				return fmt.Errorf("--iterations %d: must be between 4096 and 16384", iterations)
			}
			pw, err := secret("--password", password, passwordFile)
			if err != nil {
				return err
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			user := args[0]
			altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: iterations, Password: pw}})
			if err != nil {
				return fmt.Errorf("set the %s credential of %s: %w", m, user, err)
			}
			if r := altered[user]; r.Err != nil {
				return fmt.Errorf("set the %s credential of %s: %w", m, user, resultError(r.Err, r.ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "set the %s credential of %s (%d iterations)\n", m, user, iterations)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&mechanism, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	f.Int32Var(&iterations, "iterations", 4096, "PBKDF2 iterations, 4096 to 16384")
	f.StringVar(&password, "password", "", "the password")
	f.StringVar(&passwordFile, "password-file", "", "a file whose first line is the password (- for standard input)")
	return cmd
}

// newUsersDeleteCmd builds `tripod users delete NAME`.
func newUsersDeleteCmd(opts *topicsOptions) *cobra.Command {
	var mechanism string
	cmd := &cobra.Command{
		Use:   "delete NAME [--mechanism M]",
		Short: "Delete a user's SCRAM credentials",
		Long: `Delete NAME's SCRAM credential of --mechanism, or without it every SCRAM
credential NAME has. A user without such a credential is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			var mechanisms []kadm.ScramMechanism
			if mechanism != "" {
				m, err := parseScramMechanism(mechanism)
				if err != nil {
					return err
				}
				mechanisms = append(mechanisms, m)
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			if len(mechanisms) == 0 {
				described, err := adm.DescribeUserSCRAMs(ctx, user)
				if err != nil {
					return fmt.Errorf("describe %s: %w", user, err)
				}
				d := described[user]
				if errors.Is(d.Err, kerr.ResourceNotFound) {
					return fmt.Errorf("user %s has no SCRAM credential", user)
				}
				if d.Err != nil {
					return fmt.Errorf("describe %s: %w", user, resultError(d.Err, d.ErrMessage))
				}
				for _, c := range d.CredInfos {
					mechanisms = append(mechanisms, c.Mechanism)
				}
			}
			var del []kadm.DeleteSCRAM
			var names []string
			for _, m := range mechanisms {
				del = append(del, kadm.DeleteSCRAM{User: user, Mechanism: m})
				names = append(names, m.String())
			}
			altered, err := adm.AlterUserSCRAMs(ctx, del, nil)
			if err != nil {
				return fmt.Errorf("delete the credentials of %s: %w", user, err)
			}
			if r := altered[user]; errors.Is(r.Err, kerr.ResourceNotFound) {
				return fmt.Errorf("user %s has no %s credential", user, strings.Join(names, " or "))
			} else if r.Err != nil {
				return fmt.Errorf("delete the %s credentials of %s: %w", strings.Join(names, " and "), user, resultError(r.Err, r.ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted the %s credential of %s\n", strings.Join(names, " and "), user)
			return nil
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "SCRAM-SHA-256 or SCRAM-SHA-512 (default: every mechanism the user has)")
	return cmd
}
