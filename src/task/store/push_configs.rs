//! Push notification configs as stores keep them: each with the protocol version it was
//! registered in ([`PushRegistration`]), the caps every store applies (per task and per
//! principal, `--max-push-configs-per-task` / `--max-push-configs-per-principal`), their
//! refusals (the same from every store), and the in-memory table the memory store uses.
use std::collections::HashMap;

use prost::Message;

use crate::call::{Owner, ProtocolVersion};
use crate::error::{A2aError, LimitKind};
use crate::proto::TaskPushNotificationConfig;
use crate::task::TaskIdHasher;

/// A push notification config and the protocol version of the call that registered it, which
/// decides the form of its webhook bodies (`push/body.rs`).
///
/// The version is kept beside the config, not in it: a2aproject/A2A PR #2153 (open) would add
/// `string protocol_version = 7` to `TaskPushNotificationConfig`, but our proto stays
/// wire-identical to the released one, so the v1.0 wire never shows it. Stores that keep bytes
/// write it as that field would be written ([`Self::encode`]), so the stored form is #2153's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PushRegistration {
    /// The config, as the v1.0 RPCs show it.
    pub config: TaskPushNotificationConfig,
    /// The version its webhook bodies are written in.
    pub version: ProtocolVersion,
}

/// The field a2aproject/A2A PR #2153 adds to `TaskPushNotificationConfig`, alone: decoding a
/// stored config's bytes into it reads that field and skips the others.
#[derive(Clone, PartialEq, prost::Message)]
struct VersionField {
    #[prost(string, tag = "7")]
    protocol_version: String,
}

impl PushRegistration {
    /// A config registered through `version`.
    pub fn new(config: TaskPushNotificationConfig, version: ProtocolVersion) -> Self {
        Self { config, version }
    }

    /// The protobuf bytes of the config with the version as field 7 (left out for v1.0, its
    /// default, so a v1.0 config's bytes are what they always were). Readers that do not know
    /// the field (older replicas, the generated type) skip it.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = self.config.encode_to_vec();
        if self.version != ProtocolVersion::V1_0 {
            VersionField { protocol_version: self.version.as_str().to_owned() }.encode(&mut bytes).ok();
        }
        bytes
    }

    /// Reads what [`Self::encode`] wrote (or a config stored before versions were: v1.0).
    pub fn decode(bytes: &[u8]) -> Result<Self, prost::DecodeError> {
        let config = TaskPushNotificationConfig::decode(bytes)?;
        let version = ProtocolVersion::parse(&VersionField::decode(bytes)?.protocol_version);
        Ok(Self { config, version })
    }
}

impl From<TaskPushNotificationConfig> for PushRegistration {
    /// A config registered through v1.0.
    fn from(config: TaskPushNotificationConfig) -> Self {
        Self::new(config, ProtocolVersion::V1_0)
    }
}

/// How many push configs a store accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushConfigLimits {
    /// Configs per task (and owner).
    pub per_task: usize,
    /// Configs per principal, over all its tasks and tenants.
    pub per_principal: usize,
}

impl Default for PushConfigLimits {
    fn default() -> Self {
        Self { per_task: 10, per_principal: 1000 }
    }
}

/// The refusal of a push config beyond the per-task cap.
pub(crate) fn per_task_refused(task_id: &str, limit: usize) -> A2aError {
    A2aError::limit(
        LimitKind::Quota,
        "max-push-configs-per-task",
        format!("task {task_id} already has {limit} push notification configs, the limit"),
    )
}

/// The refusal of a push config beyond the per-principal cap.
pub(crate) fn per_principal_refused(limit: usize) -> A2aError {
    A2aError::limit(
        LimitKind::Quota,
        "max-push-configs-per-principal",
        format!("the caller already has {limit} push notification configs, the limit; delete some first"),
    )
}

/// Configs by task id, each with the owner that created it, and a count per principal (so
/// the per-principal cap costs nothing to check).
#[derive(Default)]
pub struct PushConfigTable {
    by_task: HashMap<String, Vec<(Owner, PushRegistration)>, TaskIdHasher>,
    per_principal: HashMap<String, usize>,
}

impl PushConfigTable {
    /// Inserts or replaces (by owner and id) a config, within `limits`.
    pub fn put(
        &mut self,
        owner: &Owner,
        registration: &PushRegistration,
        limits: PushConfigLimits,
    ) -> Result<(), A2aError> {
        let config = &registration.config;
        let configs = self.by_task.entry(config.task_id.clone()).or_default();
        if let Some(existing) = configs.iter_mut().find(|(o, r)| o == owner && r.config.id == config.id) {
            existing.1 = registration.clone();
            return Ok(());
        }
        if configs.iter().filter(|(o, _)| o == owner).count() >= limits.per_task {
            return Err(per_task_refused(&config.task_id, limits.per_task));
        }
        let count = self.per_principal.get(&owner.principal).copied().unwrap_or(0);
        if count >= limits.per_principal {
            return Err(per_principal_refused(limits.per_principal));
        }
        configs.push((owner.clone(), registration.clone()));
        self.per_principal.insert(owner.principal.clone(), count + 1);
        Ok(())
    }

    /// `owner`'s configs of a task, in creation order.
    pub fn of(&self, owner: &Owner, task_id: &str) -> Vec<PushRegistration> {
        self.by_task
            .get(task_id)
            .map(|configs| configs.iter().filter(|(o, _)| o == owner).map(|(_, c)| c.clone()).collect())
            .unwrap_or_default()
    }

    /// Removes one config, if it is there.
    pub fn delete(&mut self, owner: &Owner, task_id: &str, config_id: &str) {
        let Some(configs) = self.by_task.get_mut(task_id) else { return };
        let before = configs.len();
        configs.retain(|(o, r)| !(o == owner && r.config.id == config_id));
        let removed = before - configs.len();
        if configs.is_empty() {
            self.by_task.remove(task_id);
        }
        self.uncount(&owner.principal, removed);
    }

    /// Removes every config of a task (it was evicted).
    pub fn remove_task(&mut self, task_id: &str) {
        // Every evicted task comes here: most servers hold no configs at all.
        if self.by_task.is_empty() {
            return;
        }
        for (owner, _) in self.by_task.remove(task_id).unwrap_or_default() {
            self.uncount(&owner.principal, 1);
        }
    }

    fn uncount(&mut self, principal: &str, n: usize) {
        if n == 0 {
            return;
        }
        if let Some(count) = self.per_principal.get_mut(principal) {
            *count = count.saturating_sub(n);
            if *count == 0 {
                self.per_principal.remove(principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(tenant: &str, principal: &str) -> Owner {
        Owner { tenant: tenant.into(), principal: principal.into() }
    }

    fn config(task: &str, id: &str) -> PushRegistration {
        TaskPushNotificationConfig { task_id: task.into(), id: id.into(), ..Default::default() }.into()
    }

    #[test]
    fn the_version_is_stored_as_pr_2153_field_7_and_absent_for_v1() {
        let config = TaskPushNotificationConfig {
            task_id: "t".into(),
            id: "c".into(),
            url: "https://h.example/hook".into(),
            ..Default::default()
        };
        let v1 = PushRegistration::from(config.clone());
        assert_eq!(v1.encode(), config.encode_to_vec(), "a v1.0 config is stored as it always was");
        let v03 = PushRegistration::new(config.clone(), ProtocolVersion::V0_3);
        let bytes = v03.encode();
        assert_eq!(&bytes[config.encoded_len()..], b"\x3a\x030.3", "field 7, length 3, \"0.3\"");
        assert_eq!(PushRegistration::decode(&bytes).unwrap(), v03);
        assert_eq!(TaskPushNotificationConfig::decode(&bytes[..]).unwrap(), config, "older readers skip it");
        assert_eq!(PushRegistration::decode(&config.encode_to_vec()).unwrap(), v1);
    }

    #[test]
    fn the_principal_cap_spans_tasks_and_tenants_and_frees_on_delete_and_eviction() {
        let limits = PushConfigLimits { per_task: 2, per_principal: 3 };
        let mut table = PushConfigTable::default();
        let (a, a_elsewhere, b) = (owner("", "alice"), owner("t2", "alice"), owner("", "bob"));
        table.put(&a, &config("t1", "1"), limits).unwrap();
        table.put(&a, &config("t1", "1"), limits).expect("replacing is not a new config");
        table.put(&a, &config("t1", "2"), limits).unwrap();
        let error = table.put(&a, &config("t1", "3"), limits).unwrap_err();
        assert_eq!(error.metadata()["limit"], "max-push-configs-per-task");
        table.put(&a_elsewhere, &config("t2", "1"), limits).unwrap();
        let error = table.put(&a, &config("t3", "1"), limits).unwrap_err();
        assert_eq!(error.metadata()["limit"], "max-push-configs-per-principal");
        table.put(&b, &config("t3", "1"), limits).expect("bob has his own budget");

        table.delete(&a, "t1", "1");
        table.delete(&a, "t1", "1");
        table.put(&a, &config("t3", "1"), limits).expect("a delete frees one");
        table.remove_task("t2");
        table.put(&a, &config("t4", "1"), limits).expect("an evicted task frees its configs");
        assert!(table.put(&a, &config("t5", "1"), limits).is_err());
        assert_eq!(table.of(&a, "t3").len(), 1);
        assert_eq!(table.of(&b, "t3").len(), 1);
    }
}
