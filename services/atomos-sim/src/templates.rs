//! The five official flavours of `elemento-vm-templates`, served by `GET /templates`.

use atomos_driver::schema::compute::{TemplateCpu, TemplateInfo, TemplateRam, TemplateWire};
use atomos_driver::schema::{PciEntry, PciObject};

fn template(
    name: &str,
    description: &str,
    slots: u32,
    overprovision: u32,
    flags: &[&str],
    ramsize: u64,
    gpus: u32,
) -> TemplateWire {
    TemplateWire {
        info: TemplateInfo {
            name: name.to_owned(),
            description: description.to_owned(),
        },
        cpu: TemplateCpu {
            slots,
            overprovision,
            allow_smt: false,
            archs: vec!["X86_64".to_owned()],
            flags: flags.iter().map(|f| (*f).to_owned()).collect(),
        },
        ram: TemplateRam {
            ramsize,
            req_ecc: false,
        },
        pci: if gpus == 0 {
            Vec::new()
        } else {
            vec![PciEntry::Object(PciObject {
                vendor: "10de".to_owned(),
                model: "1bb1".to_owned(),
                quantity: Some(gpus),
            })]
        },
    }
}

/// Values from Elemento's VM templates repository, RAM in MiB.
pub(crate) fn templates() -> Vec<TemplateWire> {
    const GPU_DESC: &str = "Ideal for decent CPU power and over average graphical computing power";
    vec![
        template(
            "Helium",
            "Smallest virtual machine template for light tasks",
            1,
            4,
            &[],
            512,
            0,
        ),
        template(
            "Neon",
            "Ideal for small office and web browsing activity",
            2,
            2,
            &["sse2"],
            2048,
            0,
        ),
        template("Argon", GPU_DESC, 4, 2, &["sse2", "avx2"], 4096, 1),
        template(
            "Argon 2",
            "Argon with two Nvidia P4000 GPUs",
            4,
            2,
            &["sse2", "avx2"],
            4096,
            2,
        ),
        template("Kripton", GPU_DESC, 8, 2, &["sse2", "avx2"], 8192, 1),
    ]
}
