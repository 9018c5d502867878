//! The in-memory cluster behind the engine's port: every read and write the `Backend` trait
//! makes, answered from the maps as the API server would answer them (preconditions, conflicts,
//! evictions refused where a budget protects the pod), and the device plugin's part after a bind.

use super::*;

impl Backend for MemoryBackend {
    async fn evict(&self, pod: &PodRef) -> Result<Evicted> {
        let key = pod_key(&pod.namespace, &pod.name);
        if self.inner.protected.contains_key(&key)
            || self.inner.refuse_evictions.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(Error::Status {
                code: 429,
                message: format!("Cannot evict pod {pod} as it would violate the pod's disruption budget."),
                reason: "TooManyRequests".into(),
            });
        }
        // Only the pod with this UID, as the Eviction API's precondition.
        if self.inner.pods.remove_if(&key, |_, e| pod.uid.is_empty() || e.view.uid() == pod.uid).is_some() {
            self.inner.hearsay.remove(&key);
        }
        Ok(Evicted::Gone)
    }

    async fn disruption_blocked(&self, pods: &[PodRef]) -> Result<Vec<PodRef>> {
        let mut blocked: Vec<PodRef> = pods
            .iter()
            .filter(|p| self.inner.protected.contains_key(&pod_key(&p.namespace, &p.name)))
            .cloned()
            .collect();
        for p in self.budget_blocked(pods) {
            if !blocked.contains(&p) {
                blocked.push(p);
            }
        }
        Ok(blocked)
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodView>> {
        self.inner.pods.get(&pod_key(namespace, name)).and_then(|e| crate::backend::unpacked(&e.view))
    }

    fn node(&self, name: &str) -> Option<Arc<NodeView>> {
        self.inner.nodes.get(name).map(|e| e.value().clone())
    }

    async fn pod_read(&self, namespace: &str, name: &str) -> Result<Option<Arc<PodView>>> {
        if self.inner.fail_read.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Transport("connection refused".into()));
        }
        Ok(self.pod(namespace, name))
    }

    async fn pod_of_record(&self, namespace: &str, name: &str) -> Result<Option<Arc<PodView>>> {
        if self.inner.hearsay.contains_key(&pod_key(namespace, name)) {
            return Ok(None);
        }
        self.pod_read(namespace, name).await
    }

    async fn review_token(&self, token: &str) -> Result<Option<TokenIdentity>> {
        Ok(self.inner.tokens.get(token).map(|e| e.value().clone()))
    }

    async fn permits(&self, user: &RequestUser, verb: &str, resource: &str) -> Result<bool> {
        let key = (user.username.clone(), verb.to_owned(), resource.to_owned());
        Ok(self.inner.permitted.contains_key(&key))
    }

    async fn pod_placement(&self, namespace: &str, name: &str) -> Result<Option<PodPlacement>> {
        let Some(e) = self.inner.pods.get(&pod_key(namespace, name)) else { return Ok(None) };
        Ok(Some(PodPlacement { uid: e.view.uid().to_owned(), node: e.view.node_name().unwrap_or_default().to_owned() }))
    }

    async fn patch_pod(&self, pod: &PodRef, patch: &PodPatch) -> Result<()> {
        if self.inner.fail_patch.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Refused(format!("pod {pod}: patch refused")));
        }
        self.inner.pod_patches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut e = self.entry_to_edit(pod, patch.at_version.as_deref(), patch.while_unbound.is_some())?;
        // Only the annotations and labels change: the packed pod is edited in place of them,
        // not unpacked and packed whole.
        e.edit(pod, |view, written| view.with_meta(|a, l| apply_meta(a, l, written, patch)))
    }

    async fn lock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> Result<()> {
        let (key, timeout) = match kind {
            LockKind::Shared => (keys::NODE_LOCK, self.inner.lock_timeout),
            LockKind::Cambricon => (keys::CAMBRICON_LOCK, CAMBRICON_LOCK_TIMEOUT),
            LockKind::None => return Ok(()),
        };
        let now = Utc::now();
        let pods = &self.inner.pods;
        self.edit_node(node, |n| {
            if let Some(v) = n.metadata.annotations.get(key) {
                let l = codec::decode_node_lock(v)
                    .map_err(|e| Error::LockMalformed { node: node.to_owned(), why: e.to_string() })?;
                let needs = crate::backend::lock_holder_to_ask(&l, pod).map(|(ns, name)| {
                    pods.get(&pod_key(ns, name))
                        .and_then(|e| crate::backend::unpacked(&e.view))
                        .is_some_and(|p| crate::backend::holder_needs_lock(&p, node))
                });
                match crate::backend::judge_lock(&l, pod, l.is_expired(now, timeout), needs) {
                    LockVerdict::Mine => return Ok(()),
                    LockVerdict::Contention => {
                        return Err(Error::LockContention {
                            node: node.to_owned(),
                            within: crate::model::codec::format_go_duration(timeout),
                        });
                    }
                    LockVerdict::Take { .. } => {}
                }
            }
            let value = match kind {
                LockKind::Cambricon => codec::encode_rfc3339(now),
                _ => codec::encode_node_lock(now, &pod.namespace, &pod.name),
            };
            n.metadata.annotations.insert(key.into(), value);
            Ok(())
        })?;
        if kind == LockKind::Cambricon {
            self.inner.cambricon_holders.insert(node.to_owned(), (pod.namespace.clone(), pod.name.clone()));
        }
        Ok(())
    }

    async fn unlock_node(&self, node: &str, pod: &PodRef, kind: LockKind) -> Result<()> {
        self.release(node, pod, kind)
    }

    async fn bind(&self, pod: &PodRef, node: &str, patch: &PodPatch) -> Result<()> {
        if self.inner.fail_bind.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Refused(format!("pods \"{}\" binding refused", pod.name)));
        }
        if !self.inner.nodes.contains_key(node) {
            return Err(Error::NodeNotFound(node.to_owned()));
        }
        self.inner.pod_patches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.edit_pod(pod, patch.while_unbound.is_some(), |v, written| {
            apply_meta(&mut v.metadata.annotations, &mut v.metadata.labels, written, patch);
            v.spec.node_name = Some(node.to_owned());
        })?;
        self.play_plugin(pod, node);
        if self.inner.lose_bind_answers.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Transport("connection reset by peer".into()));
        }
        Ok(())
    }

    fn holds_pod(&self, namespace: &str, name: &str, uid: &str) -> bool {
        self.inner.pods.get(&pod_key(namespace, name)).is_some_and(|e| uid.is_empty() || e.view.uid() == uid)
    }

    /// Adds the pod when it is unknown; a pod already in the cluster is left as it is, with
    /// what the scheduler wrote on it. Only the newest `LEARNED_UNBOUND_KEPT` learned pods are
    /// kept while unbound.
    fn learn_pod(&self, pod: &PodView) {
        let key = pod_key(&pod.metadata.namespace, &pod.metadata.name);
        if self.inner.pods.contains_key(&key) {
            return;
        }
        let mut added = false;
        self.inner.pods.entry(key.clone()).or_insert_with(|| {
            added = true;
            PodEntry { view: PackedPod::pack(pod), written: None }
        });
        if !added {
            return;
        }
        self.inner.hearsay.insert(key.clone(), ());
        let Ok(mut learned) = self.inner.learned.lock() else { return };
        learned.push_back(key);
        while learned.len() > LEARNED_UNBOUND_KEPT {
            let Some(old) = learned.pop_front() else { break };
            // A pod that was bound is running on its node now: it stays, only the queue forgets it.
            if self.inner.pods.remove_if(&old, |_, e| e.view.node_name().is_none()).is_some() {
                self.inner.hearsay.remove(&old);
            }
        }
    }

    fn dra_classes(&self) -> Vec<crate::port::dra::DraClass> {
        self.inner.dra.list()
    }

    fn record_event(&self, event: Event) {
        if let Ok(mut q) = self.inner.events.lock() {
            if q.len() >= EVENTS_KEPT {
                q.pop_front();
            }
            q.push_back(event);
        }
    }
}
