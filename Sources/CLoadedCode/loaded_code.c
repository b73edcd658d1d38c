// In C, not in a header Swift imports: glibc declares dl_iterate_phdr(3) and its struct only
// with _GNU_SOURCE, which changes other structs (fd_set) that Swift's Glibc module holds.
#define _GNU_SOURCE
#include "loaded_code.h"

#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

typedef struct {
    uintptr_t page;
    size_t advised;
} loaded_code_release;

/// True when the object's dynamic section asks for text relocations: the loader wrote into its
/// read-only segments, which then hold pages of the process's own.
static int has_text_relocations(struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[i];
        if (header->p_type != PT_DYNAMIC) continue;
        for (const ElfW(Dyn) *entry = (const ElfW(Dyn) *)(info->dlpi_addr + header->p_vaddr); entry->d_tag != DT_NULL;
             entry++) {
            if (entry->d_tag == DT_TEXTREL) return 1;
            if (entry->d_tag == DT_FLAGS && (entry->d_un.d_val & DF_TEXTREL)) return 1;
        }
    }
    return 0;
}

static int release_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    loaded_code_release *release = data;
    // The vDSO is the kernel's, not a file's.
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "vdso") != NULL) return 0;
    if (has_text_relocations(info)) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[i];
        // Loaded and never writable: code and constant data. Relocated data (RELRO) lies in a
        // writable segment and is never chosen.
        if (header->p_type != PT_LOAD || (header->p_flags & PF_W) != 0) continue;
        uintptr_t start = info->dlpi_addr + header->p_vaddr;
        uintptr_t end = start + header->p_filesz;
        // Only whole pages of the segment: a page it shares with a neighbour is left alone.
        start = (start + release->page - 1) & ~(release->page - 1);
        end &= ~(release->page - 1);
        if (end <= start) continue;
        (void)madvise((void *)start, end - start, MADV_PAGEOUT);
        if (madvise((void *)start, end - start, MADV_DONTNEED) == 0) release->advised += end - start;
    }
    return 0;
}

size_t fleetcast_release_loaded_code(void) {
    loaded_code_release release = {(uintptr_t)sysconf(_SC_PAGESIZE), 0};
    dl_iterate_phdr(release_object, &release);
    return release.advised;
}

