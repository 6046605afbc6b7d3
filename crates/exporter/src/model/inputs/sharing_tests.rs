use super::*;

fn mode(e: SharingEvidence) -> SharingMode {
    decide(&e).0
}

#[test]
fn first_match_wins() {
    let base = SharingEvidence::default();
    assert_eq!(mode(base.clone()), SharingMode::Unallocated);
    assert_eq!(
        mode(SharingEvidence {
            holders: 1,
            ..base.clone()
        }),
        SharingMode::Exclusive
    );
    assert_eq!(
        mode(SharingEvidence {
            holders: 2,
            ..base.clone()
        }),
        SharingMode::TimeSlicing
    );
    // A time-sliced offer with a single tenant today is still time-slicing.
    assert_eq!(
        mode(SharingEvidence {
            holders: 1,
            replica_ids: true,
            ..base.clone()
        }),
        SharingMode::TimeSlicing
    );
    // Replica IDs look the same for MPS: the MPS server decides.
    assert_eq!(
        mode(SharingEvidence {
            holders: 2,
            replica_ids: true,
            mps_server: true,
            ..base.clone()
        }),
        SharingMode::Mps
    );
    assert_eq!(
        mode(SharingEvidence {
            mps_clients: 2,
            ..base.clone()
        }),
        SharingMode::Mps
    );
    assert_eq!(
        mode(SharingEvidence {
            mig_enabled_gpu: true,
            mps_server: true,
            ..base.clone()
        }),
        SharingMode::Mig
    );
    assert_eq!(
        mode(SharingEvidence {
            vgpu_guest: true,
            mig_enabled_gpu: true,
            ..base.clone()
        }),
        SharingMode::Vgpu
    );
    assert_eq!(
        mode(SharingEvidence {
            declared: Some(DeclaredStrategy::None),
            holders: 1,
            ..base.clone()
        }),
        SharingMode::Exclusive
    );
    // A scheduler's grant says more than the replica IDs it also produces.
    assert_eq!(
        decide(&SharingEvidence {
            holders: 2,
            replica_ids: true,
            fractional: Some("hami"),
            ..base.clone()
        }),
        (
            SharingMode::Fractional,
            vec!["HAMi's annotation grants containers a share of the device"]
        )
    );
    assert_eq!(
        mode(SharingEvidence {
            holders: 1,
            mig_instance: true,
            fractional: Some("kai"),
            ..base.clone()
        }),
        SharingMode::Mig
    );
}

#[test]
fn mig_instances_compose() {
    let mig = SharingEvidence {
        mig_instance: true,
        ..Default::default()
    };
    assert_eq!(mode(mig.clone()), SharingMode::Unallocated);
    assert_eq!(
        mode(SharingEvidence {
            holders: 1,
            ..mig.clone()
        }),
        SharingMode::Mig
    );
    assert_eq!(
        mode(SharingEvidence {
            holders: 1,
            replica_ids: true,
            ..mig.clone()
        }),
        SharingMode::MigTimeSlicing
    );
    assert_eq!(
        mode(SharingEvidence {
            holders: 2,
            declared: Some(DeclaredStrategy::Mps),
            ..mig
        }),
        SharingMode::MigMps
    );
}

#[test]
fn reasons_are_given() {
    let (m, why) = decide(&SharingEvidence {
        holders: 3,
        replica_ids: true,
        ..Default::default()
    });
    assert_eq!(m, SharingMode::TimeSlicing);
    assert_eq!(why.len(), 2);
}
