//! The policy flags `decide` and `kube` share, built from the key table
//! ([`infscale_core::policy::keys`]): one flag per policy key, set through `Policy::set`, so a flag, a
//! key in a policy string and a ScaledObject field mean one thing and have one set of bounds.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use infscale_core::policy::keys::{Kind, KEYS};
use infscale_core::policy::{Metric, Policy};

/// `--policy` and the flags given beside it, in the table's order.
#[derive(Debug, Clone, Default)]
pub struct PolicyArgs {
    /// A whole policy as a string (e.g. queue:24,lookahead=90).
    pub policy: Option<String>,
    /// (policy key, value) for every flag given.
    pub keys: Vec<(&'static str, String)>,
}

impl Args for PolicyArgs {
    fn augment_args(cmd: Command) -> Command {
        let mut cmd = cmd.arg(Arg::new("policy").long("policy").value_name("SPEC").help(
            "A whole policy as a string (e.g. queue:24,lookahead=90); flags given beside \
                     it override its keys",
        ));
        for key in KEYS {
            let mut help = key.doc.to_owned();
            if !key.default.is_empty() {
                help.push_str(&format!(" [default: {}]", key.default));
            }
            let arg = Arg::new(key.name).long(key.flag).help(help);
            let arg = match key.kind {
                Kind::Flag => arg.action(ArgAction::SetTrue),
                _ => arg.value_name(key.unit),
            };
            // A policy needs a target: from --policy or --target.
            let arg = if key.name == "target" {
                arg.required_unless_present("policy")
            } else {
                arg
            };
            cmd = cmd.arg(arg);
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for PolicyArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = PolicyArgs {
            policy: m.get_one::<String>("policy").cloned(),
            keys: Vec::new(),
        };
        for key in KEYS {
            let value = match key.kind {
                Kind::Flag => m.get_flag(key.name).then(|| "true".to_owned()),
                _ => m.get_one::<String>(key.name).cloned(),
            };
            if let Some(value) = value {
                args.keys.push((key.name, value));
            }
        }
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl PolicyArgs {
    /// The policy from `--policy` and the flags, validated.
    pub fn policy(&self) -> anyhow::Result<Policy> {
        let mut policy = match &self.policy {
            Some(spec) => Policy::parse(spec)?,
            None => Policy::new(Metric::Queue, 0.0),
        };
        for (key, value) in &self.keys {
            policy.set(key, value)?;
        }
        policy.validate()?;
        Ok(policy)
    }
}
