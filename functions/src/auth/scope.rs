use std::fmt;
use std::str::FromStr;

/// A permission a credential can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Read project state, sessions and files.
    ProjectRead,
    /// Change project state and run work.
    ProjectWrite,
    /// Read project memory.
    MemoryRead,
    /// Create and delete project memory.
    MemoryManage,
    /// Inspect plugins.
    PluginInspect,
    /// Read Action Audit Sessions: every caller's with a shared key, else the caller's own.
    AuditRead,
    /// Change Action Audit Sessions (close them), among those the caller may read.
    AuditWrite,
}

impl Scope {
    /// Every scope, in canonical order.
    pub const ALL: [Scope; 7] = [
        Scope::ProjectRead,
        Scope::ProjectWrite,
        Scope::MemoryRead,
        Scope::MemoryManage,
        Scope::PluginInspect,
        Scope::AuditRead,
        Scope::AuditWrite,
    ];

    /// The wire spelling, e.g. `project:read`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ProjectRead => "project:read",
            Scope::ProjectWrite => "project:write",
            Scope::MemoryRead => "memory:read",
            Scope::MemoryManage => "memory:manage",
            Scope::PluginInspect => "plugin:inspect",
            Scope::AuditRead => "audit:read",
            Scope::AuditWrite => "audit:write",
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A scope string that names no scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown scope {0:?} (known: project:read, project:write, memory:read, memory:manage, plugin:inspect, audit:read, audit:write)"
)]
pub struct UnknownScope(pub String);

impl FromStr for Scope {
    type Err = UnknownScope;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| UnknownScope(s.to_owned()))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ScopeSet(u32);

impl ScopeSet {
    /// Every scope.
    pub fn all() -> ScopeSet {
        Scope::ALL.into_iter().collect()
    }

    /// The raw bits (one per scope in [`Scope::ALL`] order), for table lookups.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Whether `scope` is in the set.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// The scopes, in canonical order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// Parses stored or typed scope strings, rejecting unknown ones.
    pub fn parse_all<S: AsRef<str>>(items: &[S]) -> Result<ScopeSet, UnknownScope> {
        items.iter().map(|s| s.as_ref().parse::<Scope>()).collect()
    }

    /// The wire spellings, in canonical order.
    pub fn to_strings(self) -> Vec<String> {
        self.iter().map(|s| s.as_str().to_owned()).collect()
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        ScopeSet(iter.into_iter().fold(0, |acc, s| acc | s.bit()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scope_round_trips() {
        for s in Scope::ALL {
            assert_eq!(s.as_str().parse::<Scope>(), Ok(s));
        }
        assert!("project:admin".parse::<Scope>().is_err());
        assert!("".parse::<Scope>().is_err());
    }

    #[test]
    fn sets_parse_and_list_in_canonical_order() {
        let set = ScopeSet::parse_all(&["audit:read", "project:read"]).unwrap();
        assert!(set.contains(Scope::AuditRead));
        assert!(!set.contains(Scope::ProjectWrite));
        assert_eq!(set.to_strings(), ["project:read", "audit:read"]);
        assert!(ScopeSet::parse_all(&["project:read", "nope"]).is_err());
        assert_eq!(ScopeSet::all().iter().count(), Scope::ALL.len());
    }
}
